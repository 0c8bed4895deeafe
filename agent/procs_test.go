package agent

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
)

// procsOf runs the test binary as the GOMAXPROCS helper with env and returns
// what it printed.
func procsOf(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append([]string{envProcsHelper + "=1", "PATH=" + os.Getenv("PATH"), "GORACE=atexit_sleep_ms=0"}, env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %v: %v", env, err)
	}
	return strings.TrimSpace(string(out))
}

// A child the supervisor started on one P for its start-up
// (api.EnvStartProcs) returns to the runtime's default GOMAXPROCS; one whose
// GOMAXPROCS=1 the operator set keeps it. Real processes: the test binary.
func TestRestoreProcs(t *testing.T) {
	def := procsOf(t)
	if def == "1" {
		t.Skip("the default GOMAXPROCS is 1 here: a return to it cannot be told from staying at 1")
	}
	if got := procsOf(t, "GOMAXPROCS=1", api.EnvStartProcs+"=1"); got != def {
		t.Fatalf("started on one P for the start-up: GOMAXPROCS %s after restoreProcs, want the default %s", got, def)
	}
	if got := procsOf(t, "GOMAXPROCS=1"); got != "1" {
		t.Fatalf("the operator's GOMAXPROCS=1: %s after restoreProcs", got)
	}
}
