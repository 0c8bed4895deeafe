package agent

import (
	"bytes"
	"io"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
)

// A child's Go memory limit follows its payload: a large conversation
// raises it to the share admission gave the run, a small one keeps the
// supervisor's, and a child with no limit gets none.
func TestFitMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	const base = 16 << 20
	for _, c := range []struct {
		limit int64
		n     int
		want  int64
	}{
		{base, 4 << 20, int64(admit.ChildCost) + admit.MessageChildFactor*(4<<20)},
		{base, 64 << 10, base},
		{math.MaxInt64, 4 << 20, math.MaxInt64},
	} {
		debug.SetMemoryLimit(c.limit)
		fitMemoryLimit(c.n)
		if got := debug.SetMemoryLimit(-1); got != c.want {
			t.Errorf("limit %d, payload %d bytes: %d, want %d", c.limit, c.n, got, c.want)
		}
	}
}

// A child started on one P (the supervisor's GOMAXPROCS) keeps it for a
// small spawn payload and returns to the runtime's default for a large one,
// before decoding it (readSpawn).
func TestSpawnPayloadFitsProcs(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	if def == 1 {
		t.Skip("the runtime's default here is one P: nothing to tell apart")
	}
	for _, c := range []struct {
		objective int
		want      int
	}{{64 << 10, 1}, {wideProcsBytes, def}} {
		runtime.GOMAXPROCS(1)
		p := payload()
		p.Contract.Objective = strings.Repeat("x", c.objective)
		var frame bytes.Buffer
		if err := api.NewFrameWriter(&frame, 0).Send(api.MethodSpawn, 0, p); err != nil {
			t.Fatal(err)
		}
		got, err := newControl(&frame, io.Discard, slog.New(slog.DiscardHandler)).readSpawn()
		if err != nil || len(got.Contract.Objective) != c.objective {
			t.Fatalf("readSpawn: %v", err)
		}
		if procs := runtime.GOMAXPROCS(0); procs != c.want {
			t.Errorf("a %d-byte objective: GOMAXPROCS %d, want %d", c.objective, procs, c.want)
		}
	}
}
