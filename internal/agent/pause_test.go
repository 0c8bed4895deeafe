package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
	"github.com/agentd/agentd/internal/testkit"
)

// countingModel finishes on its first call and counts calls.
type countingModel struct{ calls atomic.Int32 }

func (m *countingModel) Complete(ctx context.Context, req *intelligence.Request) (*intelligence.Response, error) {
	m.calls.Add(1)
	return &intelligence.Response{Content: "done", Finish: intelligence.FinishStop}, nil
}

// TestLoopHoldsBeforeModelCallWhilePaused: with the gate closed the loop
// waits in Hold and the model is not called; opening it lets the call happen.
func TestLoopHoldsBeforeModelCallWhilePaused(t *testing.T) {
	var g gate
	g.pause()
	entered := make(chan struct{}, 1)
	model := &countingModel{}
	l := &Loop{Payload: payload(), Model: model, Caller: &nopTools{}, Report: &events{},
		Log: slog.New(slog.DiscardHandler),
		Hold: func(ctx context.Context) error {
			select {
			case entered <- struct{}{}:
			default:
			}
			return g.wait(ctx)
		}}
	done := make(chan api.SubagentResult, 1)
	go func() { done <- l.Run(context.Background()) }()
	<-entered
	if n := model.calls.Load(); n != 0 {
		t.Fatalf("model called %d times while paused", n)
	}
	g.resume()
	select {
	case res := <-done:
		if res.Status != api.StatusCompleted || model.calls.Load() != 1 {
			t.Fatalf("result %+v after %d calls", res, model.calls.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not go on after resume")
	}
}

// TestLoopCancelledWhileHeld: a cancel while held ends the loop cancelled,
// without a model call.
func TestLoopCancelledWhileHeld(t *testing.T) {
	var g gate
	g.pause()
	model := &countingModel{}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(ErrCancelled)
	l := &Loop{Payload: payload(), Model: model, Caller: &nopTools{}, Report: &events{}, Log: slog.New(slog.DiscardHandler), Hold: g.wait}
	res := l.Run(ctx)
	if res.Status != api.StatusCancelled || model.calls.Load() != 0 {
		t.Fatalf("result %+v, %d model calls", res, model.calls.Load())
	}
}

// TestControlPauseResume: ctrl/pause and ctrl/resume from the supervisor close
// and open the gate, from the control reader (never the loop).
func TestControlPauseResume(t *testing.T) {
	down, downW := io.Pipe()
	c := newControl(down, io.Discard, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go c.serve(cancel)
	w := api.NewFrameWriter(downW, 0)
	if err := w.Send(api.MethodPause, 0, nil); err != nil {
		t.Fatal(err)
	}
	held := func() bool {
		cctx, ccancel := context.WithTimeout(ctx, time.Millisecond)
		defer ccancel()
		return errors.Is(c.hold.wait(cctx), context.DeadlineExceeded)
	}
	testkit.WaitFor(t, 10*time.Second, "the gate held after ctrl/pause", held)
	if err := w.Send(api.MethodResume, 0, nil); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the gate open after ctrl/resume", func() bool { return !held() })
	downW.Close()
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrControlClosed) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
}
