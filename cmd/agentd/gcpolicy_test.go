package main

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testkit"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 100}, {1 << 20, 100}, {2 << 20, 100}, {5 << 19, 80}, {3 << 20, 60}, {4 << 20, 50}, {8 << 20, 50}, {64 << 20, 50}, {1 << 30, 50},
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// TestHeapPolicyFollowsTheLiveHeap: with a large live heap the service
// collects at GOGC 50, with a small one at 100, and stopped it gives the
// runtime 100 back (issue 35: the supervisor's RSS held twice its live heap).
func TestHeapPolicyFollowsTheLiveHeap(t *testing.T) {
	stop := startHeapPolicy(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer stop()
	gogc := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	until := func(want uint64) {
		t.Helper()
		if !testkit.Poll(10*time.Second, func() bool { runtime.GC(); return gogc() == want }) {
			t.Fatalf("GOGC %d, want %d", gogc(), want)
		}
	}
	keep := make([][]byte, 32)
	for i := range keep {
		keep[i] = make([]byte, 1<<20)
	}
	until(50)
	runtime.KeepAlive(keep)
	keep = nil
	until(100)
	stop()
	if got := gogc(); got != 100 {
		t.Errorf("GOGC %d after stop, want 100", got)
	}
}

// TestQuietReleaseStep: a release comes after quietIntervals quiet
// intervals with enough to give back (quietReclaim, and a quarter of the
// live heap), not while busy, not twice within quietSpacing, and again
// after it once the process was quiet again.
func TestQuietReleaseStep(t *testing.T) {
	var q quietRelease
	t0 := time.Unix(1000, 0)
	var allocs uint64
	for i, c := range []struct {
		d                        time.Duration
		alloc, reclaimable, live uint64
		want                     bool
	}{
		{0, quietAlloc, 8 << 20, 4 << 20, false},                                    // busy
		{500 * time.Millisecond, 0, 8 << 20, 4 << 20, false},                        // quiet once
		{time.Second, quietAlloc - 1, 8 << 20, 4 << 20, true},                       // quiet twice: release
		{1500 * time.Millisecond, 0, 8 << 20, 4 << 20, false},                       // quiet once since
		{2 * time.Second, 0, 8 << 20, 4 << 20, false},                               // twice, but within quietSpacing
		{time.Second + quietSpacing - time.Millisecond, 0, 8 << 20, 4 << 20, false}, // still within it
		{quietSpacing + 2*time.Second, 0, quietReclaim - 1, 0, false},               // past it, too little to give back
		{quietSpacing + 3*time.Second, 0, 7 << 20, 32 << 20, false},                 // under a quarter of a large live heap
		{quietSpacing + 4*time.Second, 0, quietReclaim, 4 << 20, true},              // enough
		{quietSpacing + 5*time.Second, 1 << 30, 64 << 20, 4 << 20, false},           // busy again
		{2*quietSpacing + 6*time.Second, 0, 64 << 20, 4 << 20, false},               // quiet once
		{2*quietSpacing + 7*time.Second, 0, 64 << 20, 4 << 20, true},                // twice
	} {
		allocs += c.alloc
		if got := q.step(t0.Add(c.d), allocs, c.reclaimable, c.live); got != c.want {
			t.Fatalf("step %d (%s, %d allocated, %d reclaimable, %d live) = %v, want %v", i, c.d, c.alloc, c.reclaimable, c.live, got, c.want)
		}
	}
}

// TestQuietReleaseReturnsFreePages: a quiet process whose heap has free
// pages gives them back to the system with a collection of its own (a
// forced one, which nothing else in the process runs), and stops when told.
// It runs in a process of its own (quietReleaseHelper): the package's other
// tests allocate, collect and set memory limits while they run.
func TestQuietReleaseReturnsFreePages(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestQuietReleaseHelper$", "-test.v")
	cmd.Env = append(os.Environ(), envQuietHelper+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestQuietReleaseHelper") {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}

const envQuietHelper = "AGENTD_TEST_QUIET_RELEASE"

// TestQuietReleaseHelper is TestQuietReleaseReturnsFreePages's process.
func TestQuietReleaseHelper(t *testing.T) {
	if os.Getenv(envQuietHelper) == "" {
		t.Skip("the process of TestQuietReleaseReturnsFreePages")
	}
	read := func(name string) uint64 {
		s := []metrics.Sample{{Name: name}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	garbage := make([][]byte, 64)
	for i := range garbage {
		garbage[i] = make([]byte, 256<<10)
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	runtime.GC() // the 16 MiB are free pages now, most not yet returned
	forced := read("/gc/cycles/forced:gc-cycles")
	if free := read("/memory/classes/heap/free:bytes"); free < 4<<20 {
		t.Fatalf("only %d KiB of free heap pages to start with", free>>10)
	}
	stop := startQuietRelease(slog.New(slog.NewTextHandler(io.Discard, nil)), 5*time.Millisecond)
	defer stop()
	if !testkit.Poll(10*time.Second, func() bool {
		return read("/gc/cycles/forced:gc-cycles") > forced && read("/memory/classes/heap/free:bytes") < 4<<20
	}) {
		t.Fatalf("the quiet process kept %d KiB of free heap pages (forced collections %d, %d before)",
			read("/memory/classes/heap/free:bytes")>>10, read("/gc/cycles/forced:gc-cycles"), forced)
	}
}

// TestQuietReleaseOffWithGOGCOff: an operator's GOGC=off asks for no
// collection, and the quiet release does not start.
func TestQuietReleaseOffWithGOGCOff(t *testing.T) {
	t.Setenv("GOGC", "off")
	var logs strings.Builder
	stop := startQuietRelease(slog.New(slog.NewTextHandler(&logs, nil)), time.Millisecond)
	stop()
	if !strings.Contains(logs.String(), `off="GOGC=off"`) {
		t.Fatalf("log %q does not say the release is off", logs.String())
	}
}
