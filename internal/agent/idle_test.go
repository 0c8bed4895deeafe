package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// waitingModel answers its first call only once the loop has called Idle
// (the run waiting on its model), and its later calls at once.
type waitingModel struct {
	idle  chan struct{}
	calls int
}

func (m *waitingModel) Complete(ctx context.Context, req *intelligence.Request) (*intelligence.Response, error) {
	m.calls++
	if m.calls == 1 {
		select {
		case <-m.idle:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return toolTurn(), nil
	}
	return &intelligence.Response{Content: "done", Finish: intelligence.FinishStop}, nil
}

// A model call that lasts IdleAfter calls Idle while the call is still
// running: Serve gives the child's free memory back then.
func TestLoopIdleWhileWaitingOnModel(t *testing.T) {
	m := &waitingModel{idle: make(chan struct{})}
	var idles atomic.Int32
	l := &Loop{Payload: payload(), Model: m, Caller: &nopTools{}, Report: &events{}, Log: slog.New(slog.DiscardHandler),
		IdleAfter: time.Millisecond,
		Idle: func() {
			if idles.Add(1) == 1 {
				close(m.idle)
			}
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := l.Run(ctx)
	if res.Status != api.StatusCompleted {
		t.Fatalf("status %s (%s): the first model call never saw Idle", res.Status, res.Detail)
	}
}

// A waiting child's release collects once: a second collection, which
// freed what a sync.Pool keeps as its victim, cost the child more of the
// runtime's memory than it freed (figure 9: 3588 KiB private with two, 3261
// with one).
func TestReleaseCollectsOnce(t *testing.T) {
	cycles := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := cycles()
	release()
	if n := cycles() - before; n != 1 {
		t.Fatalf("release ran %d collections, want 1", n)
	}
}

// A child that has not collected yet collects while it waits only when that
// gives back firstReclaim: its first collection costs runtime memory that
// stays, more than figure 9's child (about 600 KiB allocated since
// ctrl/ready) would give back. After a first collection, idleReclaim is
// enough.
func TestWorthCollecting(t *testing.T) {
	const k = 1 << 10
	for _, c := range []struct {
		free, objects, live, cycles, atReady uint64
		want                                 bool
	}{
		{free: 0, objects: 1200 * k, live: 0, cycles: 0, atReady: 600 * k, want: false}, // figure 9's child
		{free: 0, objects: 2200 * k, live: 0, cycles: 0, atReady: 600 * k, want: true},  // a larger payload's decoding
		{free: 8 * k, objects: 1200 * k, live: 600 * k, cycles: 1, atReady: 600 * k, want: true},
		{free: 8 * k, objects: 900 * k, live: 600 * k, cycles: 1, atReady: 600 * k, want: false},
	} {
		if got := worthCollecting(c.free, c.objects, c.live, c.cycles, c.atReady); got != c.want {
			t.Errorf("%+v: %v, want %v", c, got, c.want)
		}
	}
}

// What a waiting child could give back: after a collection, the objects it
// did not find live; before any, what was allocated since the spawn frame (a child
// in a model call with a 64 KiB conversation had not collected, and kept
// about 2 MiB of objects for the wait); the free pages either way.
func TestReclaimable(t *testing.T) {
	const k = 1 << 10
	for _, c := range []struct {
		free, objects, live, cycles, atSpawn, want uint64
	}{
		{free: 8 * k, objects: 900 * k, live: 600 * k, cycles: 1, atSpawn: 500 * k, want: 308 * k},
		{free: 8 * k, objects: 2200 * k, live: 0, cycles: 0, atSpawn: 520 * k, want: 1688 * k},
		{free: 8 * k, objects: 500 * k, live: 0, cycles: 0, atSpawn: 520 * k, want: 8 * k},
		{free: 8 * k, objects: 500 * k, live: 600 * k, cycles: 2, atSpawn: 100 * k, want: 8 * k},
	} {
		if got := reclaimable(c.free, c.objects, c.live, c.cycles, c.atSpawn); got != c.want {
			t.Errorf("%+v: %d, want %d", c, got, c.want)
		}
	}
}

// A child reads the heap's size for reclaimable when its spawn frame comes,
// not at ctrl/ready: the first read of runtime/metrics builds its table of
// every metric (about 20 KiB, kept), which a child waiting in the warm pool
// would carry for nothing (figure 9).
func TestHeapIsReadWhenTheSpawnComes(t *testing.T) {
	heapAtSpawn.Store(0)
	r, w, _, code := serveOverPipes("", nil)
	if f, err := r.Read(); err != nil || f.Method != api.MethodReady {
		t.Fatalf("first frame %+v %v", f, err)
	}
	if n := heapAtSpawn.Load(); n != 0 {
		t.Fatalf("the heap was read (%d bytes) before the spawn frame came", n)
	}
	p := payload()
	if err := w.Send(api.MethodSpawn, 0, p); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if f.Method == api.MethodResult {
			break
		}
	}
	if c := <-code; c != 0 {
		t.Fatalf("exit %d", c)
	}
	if heapAtSpawn.Load() == 0 {
		t.Fatal("the heap was not read when the spawn frame came")
	}
}

// The memory dump (EnvMemDump) writes the heap profile, the runtime's
// memory classes, every goroutine's stack and the process's smaps; unset, it
// writes nothing.
func TestMemDump(t *testing.T) {
	dir := t.TempDir()
	if err := writeMemDump(dir, 7); err != nil {
		t.Fatal(err)
	}
	for ext, want := range map[string]string{
		".heap":       "# inuse_bytes inuse_objects alloc_bytes alloc_objects",
		".metrics":    "/memory/classes/heap/objects:bytes ",
		".goroutines": "goroutine ",
		".smaps":      "Private_Dirty:",
	} {
		b, err := os.ReadFile(filepath.Join(dir, "7"+ext))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("7%s does not hold %q", ext, want)
		}
	}
	if memDumpDir != "" {
		t.Skipf("%s is set", EnvMemDump)
	}
	dumpMemory()
	if memDumped {
		t.Fatal("with no directory set, the child dumped its memory")
	}
}
