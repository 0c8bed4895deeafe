package main

import (
	"io"
	"log/slog"
	"runtime"
	"runtime/metrics"
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
