package main

import (
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// The supervisor's heap policy (issue 35, docs/performance.md figure 9).
// Under GOGC 100 the heap grows to twice its live part between collections,
// and the pages it grew into stay resident: with hundreds of waiting
// children, whose nodes, tasks and messages are most of the live heap, the
// supervisor's RSS held about twice what they keep. After each collection
// the policy sets GOGC so the headroom (what the heap may grow past its
// live part) is max(heapFloor, live/2): GOGC 100 for a heap of up to
// heapFloor live, falling to minGCPercent from twice that. A small heap
// (an idle service, the front at low concurrency) collects as before; a
// large one collects twice as often for the same allocation, each time
// marking what it keeps. An operator's GOGC is kept as set. heapFloor was
// the runtime's own minimum heap, 4 MiB, until figure 9 showed that
// headroom to be most of what the supervisor grew by from idle to 50
// children waiting on their models (their live heap about 3 MiB, the
// heap's pages at GOGC 100 about 8 MiB, kept resident while they wait): at
// 2 MiB the supervisor held about 2 MiB less there.
const (
	heapFloor    = 2 << 20
	minGCPercent = 50
)

// gcPercentFor is the GOGC for a live heap of live bytes, in steps of 10 so
// it changes rarely.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return 100
	}
	p := int(max(heapFloor, live/2) * 100 / live)
	return min(100, max(minGCPercent, p/10*10))
}

// heapPolicy applies gcPercentFor after every collection until stopped.
type heapPolicy struct {
	mu      sync.Mutex
	stopped bool
	percent int // what it set last
	sample  []metrics.Sample
}

// heapPolicyOn: a process has one GOGC, so one service applies the policy.
var heapPolicyOn atomic.Bool

// gcSentinel is an object no one keeps: its cleanup runs after the
// collection that finds it gone, and arms the next.
type gcSentinel struct {
	_ *byte
	_ [2]uint64
}

// startHeapPolicy starts the policy unless GOGC is set in the environment
// (or another service in the process applies it), and returns the function
// that stops it and gives the runtime GOGC 100 back.
func startHeapPolicy(log *slog.Logger) (stop func()) {
	if os.Getenv("GOGC") != "" {
		log.Info("heap policy", "gogc", os.Getenv("GOGC"), "source", "GOGC")
		return func() {}
	}
	if !heapPolicyOn.CompareAndSwap(false, true) {
		return func() {}
	}
	hp := &heapPolicy{percent: 100, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	log.Info("heap policy", "headroom", "max(2MiB, live/2)", "gogc_min", minGCPercent, "gogc_max", 100)
	hp.arm()
	return func() {
		hp.mu.Lock()
		defer hp.mu.Unlock()
		if !hp.stopped {
			hp.stopped = true
			debug.SetGCPercent(100)
			heapPolicyOn.Store(false)
		}
	}
}

func (hp *heapPolicy) arm() {
	runtime.AddCleanup(new(gcSentinel), func(hp *heapPolicy) { hp.afterGC() }, hp)
}

// afterGC runs on the runtime's cleanup goroutine after a collection.
func (hp *heapPolicy) afterGC() {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if hp.stopped {
		return
	}
	metrics.Read(hp.sample)
	if p := gcPercentFor(hp.sample[0].Value.Uint64()); p != hp.percent {
		debug.SetGCPercent(p)
		hp.percent = p
	}
	hp.arm()
}
