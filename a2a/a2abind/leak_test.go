package a2abind

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// TestMain fails the run if the tests leave a goroutine behind. Re-exec'd by
// a supervisor as a subagent (hollow_test.go), the test binary is that
// subagent instead.
func TestMain(m *testing.M) {
	if os.Getenv(api.EnvSubagent) != "" {
		os.Exit(heldChild())
	}
	goleak.VerifyTestMain(m, testkit.LeakOptions()...)
}
