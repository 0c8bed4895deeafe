package agent

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/testkit"
)

// TestMain fails the run if the tests leave a goroutine behind. With
// envTestChild set, the test binary is a subagent instead (realChild); with
// envTestAllocs, a process that measures one probe (freshAllocs).
func TestMain(m *testing.M) {
	if os.Getenv(envTestChild) == "1" {
		os.Exit(Main())
	}
	if name := os.Getenv(envTestAllocs); name != "" {
		os.Exit(printAllocs(name))
	}
	goleak.VerifyTestMain(m, testkit.LeakOptions()...)
}
