package agent

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/testkit"
)

// envProcsHelper makes the test binary a helper that runs restoreProcs and
// prints its GOMAXPROCS (TestRestoreProcs).
const envProcsHelper = "AGENTD_TEST_PROCS_HELPER"

// TestMain fails the run if the tests leave a goroutine behind.
func TestMain(m *testing.M) {
	if os.Getenv(envProcsHelper) != "" {
		restoreProcs()
		fmt.Println(runtime.GOMAXPROCS(0))
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, testkit.LeakOptions()...)
}
