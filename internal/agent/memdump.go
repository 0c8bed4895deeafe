package agent

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
)

// EnvMemDump names a directory into which a subagent writes where its memory
// is while it waits on its model: a diagnostic, off unless the variable is
// set (the supervisor passes it on to its children). Its value is the
// directory, or "all:" and the directory: then the child records every
// allocation's stack (runtime.MemProfileRate 1, which costs memory of its
// own, so that such a child's figures are not figure 9's; without it the heap
// profile is the runtime's sample, one allocation in about 512 KiB). The
// first time a model call has lasted Loop.IdleAfter, after releaseIdle,
// it writes into the directory, each file named by its pid:
// PID.heap (the heap profile, as text: heapProfile, after a collection the
// dump makes once it has read the rest),
// PID.metrics (runtime/metrics' /memory/classes/*, /gc/* and the goroutine
// count), PID.goroutines (every goroutine's stack) and PID.smaps (its
// /proc/self/smaps). docs/performance.md, figure 9, has what it showed.
const EnvMemDump = "AGENT_CHILD_MEMDUMP"

// memDumpDir is EnvMemDump's directory, "" when off.
var memDumpDir = os.Getenv(EnvMemDump)

func init() {
	if dir, ok := strings.CutPrefix(memDumpDir, "all:"); ok {
		memDumpDir = dir
		runtime.MemProfileRate = 1
	}
}

// memDumped is set once this process has written its dump.
var memDumped bool

// dumpMemory writes the memory dump into memDumpDir once. The caller is the
// idle callback, at most one at a time.
func dumpMemory() {
	if memDumpDir == "" || memDumped {
		return
	}
	memDumped = true
	if err := writeMemDump(memDumpDir, os.Getpid()); err != nil {
		fmt.Fprintln(os.Stderr, "agentd subagent: memory dump:", err)
	}
}

// writeMemDump writes the files EnvMemDump describes into dir, for pid.
func writeMemDump(dir string, pid int) error {
	// What the runtime and the kernel say first, before the dump's own
	// allocations.
	var m bytes.Buffer
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") || strings.HasPrefix(d.Name, "/gc/") || d.Name == "/sched/goroutines:goroutines" {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			fmt.Fprintf(&m, "%s %d\n", s.Name, s.Value.Uint64())
		}
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return fmt.Errorf("read smaps: %w", err)
	}
	base := filepath.Join(dir, fmt.Sprint(pid))
	if err := os.WriteFile(base+".metrics", m.Bytes(), 0o600); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	if err := os.WriteFile(base+".smaps", smaps, 0o600); err != nil {
		return fmt.Errorf("write smaps: %w", err)
	}
	// The heap profile is as of the last collection: one now, after the
	// figures above were read, makes it this moment's.
	runtime.GC()
	if err := os.WriteFile(base+".heap", heapProfile(), 0o600); err != nil {
		return fmt.Errorf("write heap profile: %w", err)
	}
	stacks := make([]byte, 1<<20)
	stacks = stacks[:runtime.Stack(stacks, true)]
	if err := os.WriteFile(base+".goroutines", stacks, 0o600); err != nil {
		return fmt.Errorf("write goroutines: %w", err)
	}
	return nil
}

// heapProfile is the heap profile as text (runtime.MemProfile; not
// runtime/pprof, which the binary does not link): a line per allocation
// site, "inuse_bytes inuse_objects alloc_bytes alloc_objects", then its
// stack, innermost first, as "\tfunction file:line" lines.
func heapProfile() []byte {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# inuse_bytes inuse_objects alloc_bytes alloc_objects (runtime.MemProfileRate %d)\n", runtime.MemProfileRate)
	for _, r := range recs {
		fmt.Fprintf(&b, "%d %d %d %d\n", r.InUseBytes(), r.InUseObjects(), r.AllocBytes, r.AllocObjects)
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			fmt.Fprintf(&b, "\t%s %s:%d\n", f.Function, f.File, f.Line)
			if !more {
				break
			}
		}
	}
	return b.Bytes()
}
