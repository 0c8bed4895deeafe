package agent

import (
	"log/slog"
	"os"
	"runtime/metrics"
	"strings"

	"github.com/agentd/agentd/api"
)

// memClasses is the runtime's account of the child's memory now: every
// /memory/classes/* metric (bytes, by name without the prefix), the GC's
// cycles, the heap's objects, the goroutines and the threads (whose g0 and
// signal stacks, 48 KiB a thread, count in heap/stacks). It is what figure
// 9's idle child is made of, by the runtime's classes (heap objects, free
// and released pages, stacks, the GC's metadata, the allocator's other
// off-heap state).
func memClasses() map[string]uint64 {
	var s []metrics.Sample
	for _, d := range metrics.All() {
		switch {
		case strings.HasPrefix(d.Name, "/memory/classes/"), d.Name == "/gc/cycles/total:gc-cycles", d.Name == "/gc/heap/objects:objects",
			d.Name == "/sched/goroutines:goroutines", d.Name == "/sched/threads/total:threads":
			s = append(s, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(s)
	out := make(map[string]uint64, len(s))
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			out[strings.TrimPrefix(v.Name, "/memory/classes/")] = v.Value.Uint64()
		}
	}
	return out
}

// logMemClasses logs memClasses at the point named when, if the child's
// environment sets api.EnvChildMemStats (off by default: the dump allocates,
// and a child that is measured should not).
func logMemClasses(log *slog.Logger, when string) {
	if os.Getenv(api.EnvChildMemStats) == "" {
		return
	}
	m := memClasses()
	attrs := make([]any, 0, 2*len(m)+2)
	attrs = append(attrs, "at", when)
	for k, v := range m {
		attrs = append(attrs, k, v)
	}
	logInfo(log, "memory classes", attrs...) // unwinds no stack: maps no pages into the child it measures
}
