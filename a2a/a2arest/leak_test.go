package a2arest

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/testkit"
)

// TestMain fails the run if the tests leave a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testkit.LeakOptions()...) }
