package e2e

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/internal/testkit"
)

// With --warm-pool 2 the service keeps two children ready before any request;
// a message runs on one of them, the pool refills, and a SIGTERM drain kills
// the idle children, exits 0 and leaves nothing behind.
func TestWarmPoolServesAndDrains(t *testing.T) {
	t.Parallel()
	s := startService(t, "--warm-pool", "2", "--log-level", "debug")
	var pool []int
	testkit.WaitFor(t, 10*time.Second, "two warm children", func() bool {
		pool = testkit.Children(s.cmd.Process.Pid)
		return len(pool) == 2
	})
	res, err := s.client(t).SendMessage(context.Background(), textMessage("count these words please"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(task), "4 words") {
		t.Fatalf("task %s: %q", task.Status.State, artifactText(task))
	}
	testkit.WaitFor(t, 10*time.Second, "the spawn served by the warm pool", func() bool {
		return strings.Contains(s.logs.String(), `"msg":"spawn served by the warm pool"`)
	})
	// The child that ran the task was one of the pool's: it is gone, and a new
	// one took its place.
	var now []int
	testkit.WaitFor(t, 10*time.Second, "the pool refilled", func() bool {
		now = testkit.Children(s.cmd.Process.Pid)
		if len(now) != 2 {
			return false
		}
		kept := 0
		for _, p := range now {
			if slices.Contains(pool, p) {
				kept++
			}
		}
		return kept == 1
	})
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(10 * time.Second):
		t.Fatal("agentd did not drain within 10s")
	}
	if s.err != nil {
		t.Fatalf("drain exit: %v", s.err)
	}
	for _, pid := range append(pool, now...) {
		if !testkit.GroupDead(pid) {
			t.Errorf("warm child %d survived the drain", pid)
		}
	}
	if !strings.Contains(s.logs.String(), `"msg":"warm pool: drained"`) {
		t.Error("the drain did not report the warm pool")
	}
}

func TestWarmPoolFlagIsValidated(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"-1", "65", "two"} {
		wantUsageError(t, "", "warm-pool", "serve", "--listen", "127.0.0.1:0", "--warm-pool", v)
	}
	wantUsageError(t, "AGENT_WARM_POOL=-3", "warm-pool", "serve", "--listen", "127.0.0.1:0")
}
