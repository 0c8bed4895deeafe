package supervisor

import (
	"runtime"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testkit"
)

// TestGoroutinesPerChild: a live child costs the supervisor three
// goroutines, its supervise loop, its control-out reader and its stderr
// forwarder: its exit is the reaper's call (procExit) and its detectors run
// on timers (watcher), where each had a goroutine of its own waiting through
// the child's life (issue 35: the supervisor's memory per live child).
func TestGoroutinesPerChild(t *testing.T) {
	s, _ := newSupervisor(t, "responsive", func(c *Config) {
		c.PingInterval = time.Minute // no ping write in flight while counting
		c.ProgressTimeout = time.Hour
	})
	const n = 6
	base := runtime.NumGoroutine()
	var runs []*Run
	for range n {
		runs = append(runs, start(t, s, testPayload("wait", time.Minute)))
	}
	testkit.WaitFor(t, 20*time.Second, "every child given its payload", func() bool {
		k := 0
		for _, nd := range s.liveNodes() {
			if p := nd.getProc(); p != nil && p.spawned.Load() {
				k++
			}
		}
		return k == n
	})
	var got int
	if !testkit.Poll(5*time.Second, func() bool {
		got = runtime.NumGoroutine() - base
		return got <= 3*n
	}) {
		t.Fatalf("%d goroutines for %d live children (%.1f a child), want at most 3 a child", got, n, float64(got)/n)
	}
	t.Logf("%d goroutines for %d live children", got, n)
	for _, r := range runs {
		s.Cancel(r.Handle(), "done")
	}
	for _, r := range runs {
		result(t, r, 30*time.Second)
	}
}
