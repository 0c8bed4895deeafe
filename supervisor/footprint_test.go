package supervisor

import (
	"runtime"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testkit"
)

// TestGoroutinesPerChild: a live child costs the supervisor one goroutine,
// its supervise loop: its exit is the reaper's call (procExit), its
// detectors run on timers (watcher), and its control-out and stderr are
// read by the one goroutine of theFramePoller and of theLogPoller, where
// each had a goroutine of its own waiting through the child's life (issue
// 35: the supervisor's memory per live child).
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
		return got <= n+2 // the pollers' two
	}) {
		t.Fatalf("%d goroutines for %d live children (%.1f a child), want at most 1 a child and the two pollers", got, n, float64(got)/n)
	}
	t.Logf("%d goroutines for %d live children", got, n)
	for _, r := range runs {
		s.Cancel(r.Handle(), "done")
	}
	for _, r := range runs {
		result(t, r, 30*time.Second)
	}
}

// TestMemoryPerChild: what the supervisor's own heap and goroutine stacks
// keep for each waiting child, after collections, over many children: the
// node, its process's state and pipes, its timers and its goroutines' stacks
// (issue 35: the supervisor's memory per live child, figure 9). The
// payload here is small; a task's message is not the supervisor's to
// count.
func TestMemoryPerChild(t *testing.T) {
	s, _ := newSupervisor(t, "responsive", func(c *Config) {
		c.PingInterval = time.Minute // no ping write in flight while counting
		c.ProgressTimeout = time.Hour
	})
	spawned := func(n int) func() bool {
		return func() bool {
			k := 0
			for _, nd := range s.liveNodes() {
				if p := nd.getProc(); p != nil && p.spawned.Load() {
					k++
				}
			}
			return k == n
		}
	}
	// One child first, so what the first spawn sets up once (encoders,
	// pools, the reaper) is in the base.
	first := start(t, s, testPayload("wait", time.Minute))
	testkit.WaitFor(t, 20*time.Second, "the first child given its payload", spawned(1))
	s.Cancel(first.Handle(), "done")
	result(t, first, 30*time.Second)
	base := settledMemory()
	const n = 48
	var runs []*Run
	for range n {
		runs = append(runs, start(t, s, testPayload("wait", time.Minute)))
	}
	testkit.WaitFor(t, 30*time.Second, "every child given its payload", spawned(n))
	live := settledMemory()
	heap := (int64(live.HeapAlloc) - int64(base.HeapAlloc)) / n
	stack := (int64(live.StackInuse) - int64(base.StackInuse)) / n
	t.Logf("a waiting child: %d B of heap, %d B of goroutine stacks", heap, stack)
	for _, r := range runs {
		s.Cancel(r.Handle(), "done")
	}
	for _, r := range runs {
		result(t, r, 30*time.Second)
	}
	if heap > maxHeapPerChild {
		t.Errorf("a waiting child keeps %d B of the supervisor's heap, want at most %d", heap, maxHeapPerChild)
	}
	if stack > maxStackPerChild && !raceEnabled {
		t.Errorf("a waiting child keeps %d B of goroutine stacks, want at most %d", stack, maxStackPerChild)
	}
}

// Bounds of TestMemoryPerChild, over what it measured (issue 35): the heap
// 16 KB a child when the control-out reader and the stderr forwarding each
// kept a 4 KiB buffer (12 KB with either), 7.8 KB without (9.3 under the
// race detector), 7.0 with the stderr forwarded by theLogPoller (no
// *os.File, goroutine or closure of its own), 6.8 with control-out read by
// theFramePoller; the stacks 25 KiB when the supervise goroutine's waiting
// frames (5.3 KiB) kept its stack at the 16 KiB the spawn grew it to, 17
// KiB with them at 2.8 KiB, which lets the collector halve it, 13-15.4
// without the stderr forwarder's 4 KiB stack, 8.7 without the control-out
// reader's 4 KiB: the supervise goroutine's 8 KiB is what is left.
const (
	maxHeapPerChild  = 8 << 10
	maxStackPerChild = 11 << 10
)

// settledMemory is the process's memory statistics after two collections
// (the second shrinks the stacks the first found oversized, and frees what
// the first's finalizers let go).
func settledMemory() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
