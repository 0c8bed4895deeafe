package agent

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"sync"
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

// A waiting child's release frees what a sync.Pool keeps (encoding/json's
// encoder buffer, grown to the whole request): one collection only moves a
// pool's items to its victim cache, so they stayed on the heap for the wait.
func TestReleaseFreesPooledBuffers(t *testing.T) {
	const size = 8 << 20
	var pool sync.Pool
	b := make([]byte, size)
	pool.Put(&b)
	live := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	release()
	if got := live(); got >= size {
		t.Fatalf("after release the heap holds %d bytes live: the pooled %d-byte buffer was kept", got, size)
	}
	runtime.KeepAlive(&pool)
}

// What a waiting child could give back: after a collection, the objects it
// did not find live; before any, what was allocated since ctrl/ready (a child
// in a model call with a 64 KiB conversation had not collected, and kept
// about 2 MiB of objects for the wait); the free pages either way.
func TestReclaimable(t *testing.T) {
	const k = 1 << 10
	for _, c := range []struct {
		free, objects, live, cycles, atReady, want uint64
	}{
		{free: 8 * k, objects: 900 * k, live: 600 * k, cycles: 1, atReady: 500 * k, want: 308 * k},
		{free: 8 * k, objects: 2200 * k, live: 0, cycles: 0, atReady: 520 * k, want: 1688 * k},
		{free: 8 * k, objects: 500 * k, live: 0, cycles: 0, atReady: 520 * k, want: 8 * k},
		{free: 8 * k, objects: 500 * k, live: 600 * k, cycles: 2, atReady: 100 * k, want: 8 * k},
	} {
		if got := reclaimable(c.free, c.objects, c.live, c.cycles, c.atReady); got != c.want {
			t.Errorf("%+v: %d, want %d", c, got, c.want)
		}
	}
}
