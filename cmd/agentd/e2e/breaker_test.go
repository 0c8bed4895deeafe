package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// Idle warm children killed from outside, six within seconds, open the warm
// pool's restart breaker: a2a.Tree shows it open with its next trial, and
// `agentd ctl a2a.CloseBreaker` closes it, after which the pool fills again
// at once (the default cool-down, 30s, has not passed).
func TestWarmPoolBreakerClosedByCtl(t *testing.T) {
	t.Parallel()
	s := startAdmService(t, "--warm-pool", "2")
	pid := s.cmd.Process.Pid
	var killed []int
	for len(killed) < 6 {
		var idle []int
		testkit.WaitFor(t, 20*time.Second, "an idle warm child to kill", func() bool {
			idle = nil
			for _, c := range testkit.Children(pid) {
				if !slices.Contains(killed, c) && testkit.Alive(c) {
					idle = append(idle, c)
				}
			}
			return len(idle) > 0 || strings.Contains(s.logs.String(), "restart breaker open")
		})
		if len(idle) == 0 {
			break // opened early (a refill that died as it started counts too)
		}
		for _, c := range idle {
			if err := syscall.Kill(c, syscall.SIGKILL); err == nil {
				killed = append(killed, c)
			}
		}
	}
	var b api.Breaker
	testkit.WaitFor(t, 20*time.Second, "the warm pool's breaker open", func() bool {
		for _, x := range s.tree().Breakers {
			if x.Key == "warm-pool" {
				b = x
			}
		}
		return b.State == api.BreakerOpen
	})
	if b.NextTrial == nil || b.Since == nil || !b.NextTrial.After(*b.Since) || b.Openings != 1 {
		t.Fatalf("open breaker %+v", b)
	}
	if !strings.Contains(s.logs.String(), `"exit":"killed by SIGKILL"`) {
		t.Errorf("the deaths are not logged by their signal's name:\n%s", s.logs.String())
	}
	tokenFile := filepath.Join(t.TempDir(), "op-token")
	if err := os.WriteFile(tokenFile, []byte(opToken), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := agentdCommand(t, "ctl", "tree", "--to", s.url, "--token-file", tokenFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "breaker warm-pool: open since") || !strings.Contains(string(out), "next trial in") {
		t.Fatalf("ctl tree: %v\n%s", err, out)
	}
	out, err = agentdCommand(t, "ctl", "a2a.CloseBreaker", "--to", s.url, "--token-file", tokenFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "was: open") || !strings.Contains(string(out), "breaker warm-pool: closed") {
		t.Fatalf("ctl a2a.CloseBreaker: %v\n%s", err, out)
	}
	testkit.WaitFor(t, 20*time.Second, "the pool refilled after the close", func() bool {
		n := 0
		for _, c := range testkit.Children(pid) {
			if !slices.Contains(killed, c) && testkit.Alive(c) {
				n++
			}
		}
		return n == 2
	})
}
