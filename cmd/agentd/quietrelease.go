package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"time"
)

// The supervisor's release of its free heap when it goes quiet (issue 35,
// docs/performance.md figure 9). Its subagents spend most of their lives
// waiting on their models, and so, with them, does the supervisor: it
// allocates next to nothing while they wait. But the pages its heap grew
// into while it started them (the requests, the payloads, the spawns' own
// garbage) stay resident: the runtime returns to the system only what lies
// beyond its next heap goal, and with nothing allocated no collection comes
// to find the garbage. With 200 children waiting that was about 3 MiB the
// supervisor held for nothing, all the wait, and with 400 about 5 MiB.
//
// So when the supervisor has allocated less than quietAlloc in each of
// quietIntervals intervals in a row, and a collection could give back at
// least quietReclaim and a quarter of the live heap (a collection costs in
// proportion to what is live, so a large heap, a memory store of many
// tasks, is not collected for less than a burst's worth of pages), it
// collects once and returns its free pages (debug.FreeOSMemory, about a
// millisecond on a heap of a few MiB), at most once every quietSpacing. A
// service under load is never quiet, and pays nothing. The same holds after
// a burst of runs ends: 400 of figure 9's ending together left the
// supervisor at 123 MiB RSS (its heap had grown into 100 MiB while it wrote
// their results), which it kept until a release took it to 39 MiB.
const (
	quietInterval  = 500 * time.Millisecond
	quietIntervals = 2
	quietAlloc     = 256 << 10
	quietReclaim   = 1 << 20
	quietSpacing   = 2 * time.Second
)

// quietRelease decides, interval by interval, when to release.
type quietRelease struct {
	intervals int       // quiet intervals in a row so far
	allocs    uint64    // the heap's cumulative allocation at the last step
	last      time.Time // the last release
}

// step takes one interval's reading (the heap's cumulative allocation, what
// a collection could give back, the live heap at the last collection) at
// now, and says whether to release.
func (q *quietRelease) step(now time.Time, allocs, reclaimable, live uint64) bool {
	delta := allocs - q.allocs
	q.allocs = allocs
	if delta >= quietAlloc {
		q.intervals = 0
		return false
	}
	q.intervals++
	if q.intervals < quietIntervals || reclaimable < max(quietReclaim, live/4) || (!q.last.IsZero() && now.Sub(q.last) < quietSpacing) {
		return false
	}
	q.last, q.intervals = now, 0
	return true
}

// heapReclaimable reads the heap's cumulative allocation, what a collection
// could give back (its free pages not yet returned to the system and the
// objects the last collection did not find live; before any collection,
// none are known to be garbage) and the live heap the last collection found.
func heapReclaimable(s []metrics.Sample) (allocs, reclaimable, live uint64) {
	metrics.Read(s)
	allocs, free, objects, live := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64()
	reclaimable = free
	if live > 0 && objects > live {
		reclaimable += objects - live
	}
	return allocs, reclaimable, live
}

// startQuietRelease releases the heap's free pages each time the process
// goes quiet (quietRelease), every interval, until the returned function is
// called. With GOGC=off the operator has asked for no collection, and it
// does not start.
func startQuietRelease(log *slog.Logger, interval time.Duration) (stop func()) {
	if strings.EqualFold(os.Getenv("GOGC"), "off") {
		log.Info("quiet release", "off", "GOGC=off")
		return func() {}
	}
	log.Info("quiet release", "quiet_below_kib", quietAlloc>>10, "interval", interval.String(), "min_reclaim_kib", quietReclaim>>10, "spacing", quietSpacing.String())
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		s := []metrics.Sample{
			{Name: "/gc/heap/allocs:bytes"},
			{Name: "/memory/classes/heap/free:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/gc/heap/live:bytes"},
		}
		var q quietRelease
		q.allocs, _, _ = heapReclaimable(s)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				allocs, reclaimable, live := heapReclaimable(s)
				if q.step(now, allocs, reclaimable, live) {
					debug.FreeOSMemory()
					log.Debug("quiet: heap released", "reclaimable_kib", reclaimable>>10)
					// The release's own allocation is not the service's.
					q.allocs, _, _ = heapReclaimable(s)
				}
			}
		}
	}()
	return func() { close(done); <-ended }
}
