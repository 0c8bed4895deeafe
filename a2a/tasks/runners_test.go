package tasks

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/internal/testkit"
)

// goroutineID is the calling goroutine's number, from its stack's header.
func goroutineID() int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	n, _ := strconv.Atoi(string(f[1]))
	return n
}

// TestEngineRunsOnAnEarlierRunsGoroutine: back-to-back sends run their
// executors on the goroutine that ran the first, whose stack has grown
// already, not on a new goroutine each (runners).
func TestEngineRunsOnAnEarlierRunsGoroutine(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	e := NewEngine(NewMemoryStore(100, time.Hour), fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		mu.Lock()
		seen[goroutineID()]++
		mu.Unlock()
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}}, nil)
	const sends = 20
	for i := range sends {
		// The runner that ran the last send waits idle before the next.
		testkit.WaitFor(t, 5*time.Second, "an idle runner", func() bool { return i == 0 || e.runners.idle.Load() > 0 })
		if task := a2atest.Send(t, e, a2atest.Msg("x")); task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("send %d: %s", i, task.Status.State)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("%d sends ran on %d goroutines (%v), want all on one", sends, len(seen), seen)
	}
}

// TestRunnersIdleBounded: at most maxIdleRunners runners wait once many runs
// end together, and each that waits ends after runnerIdle (no goroutine is
// left behind for good).
func TestRunnersIdleBounded(t *testing.T) {
	r := runners{work: make(chan func())}
	const runs = 3 * maxIdleRunners
	var started, finished sync.WaitGroup
	release := make(chan struct{})
	started.Add(runs)
	finished.Add(runs)
	for range runs {
		r.launch(func() {
			started.Done()
			<-release
			finished.Done()
		})
	}
	started.Wait() // every run has a goroutine of its own: none was idle
	base := runtime.NumGoroutine()
	close(release)
	finished.Wait()
	testkit.WaitFor(t, 5*time.Second, "the runners past the bound to end", func() bool {
		return runtime.NumGoroutine() <= base-runs+maxIdleRunners && r.idle.Load() == maxIdleRunners
	})
	// A run takes an idle runner: no new goroutine.
	done := make(chan struct{})
	r.launch(func() { close(done) })
	<-done
	if n := runtime.NumGoroutine(); n > base-runs+maxIdleRunners {
		t.Errorf("%d goroutines after a run on an idle runner, want at most %d", n, base-runs+maxIdleRunners)
	}
	testkit.WaitFor(t, 5*time.Second, "the idle runners to end", func() bool {
		return r.idle.Load() == 0 && runtime.NumGoroutine() <= base-runs
	})
}
