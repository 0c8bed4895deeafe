package tasks

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
)

// fakeExec is an AgentExecutor driven by a function.
type fakeExec struct {
	exec func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error
}

func (f fakeExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return f.exec(ctx, reqCtx, q)
}

// FailureMetadata implements FailureMetadata.
func (f fakeExec) FailureMetadata() map[string]any { return map[string]any{"test/forced": "crashed"} }

func (f fakeExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// Every task ends terminal, whatever the executor does.
func TestEngineForcesTerminalState(t *testing.T) {
	for name, f := range map[string]func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error{
		"error": func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
			return errors.New("boom")
		},
		"panic": func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
			panic("kaboom")
		},
		"no final event": func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
			return q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil))
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := NewEngine(NewMemoryStore(10, time.Hour), fakeExec{f}, nil)
			task := a2atest.Send(t, e, a2atest.Msg("x"))
			if task.Status.State != a2a.TaskStateFailed || task.Metadata["test/forced"] != "crashed" {
				t.Fatalf("state = %s, metadata %v; want failed with the executor's FailureMetadata", task.Status.State, task.Metadata)
			}
			if e.InFlight() != 0 {
				t.Fatalf("%d tasks still live", e.InFlight())
			}
		})
	}
}

func TestEngineRefusesEventsAfterTerminal(t *testing.T) {
	var late error
	done := make(chan struct{})
	e := NewEngine(NewMemoryStore(10, time.Hour), fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		q.Write(ctx, ev)
		late = q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil))
		close(done)
		return nil
	}}, nil)
	task := a2atest.Send(t, e, a2atest.Msg("x"))
	<-done
	if !errors.Is(late, errTaskFinished) {
		t.Fatalf("late write: %v", late)
	}
	got, _ := e.OnGetTask(context.Background(), &a2a.TaskQueryParams{ID: task.ID})
	if got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state after late write: %s", got.Status.State)
	}
}

func TestResubscribeToFinishedTask(t *testing.T) {
	e := NewEngine(NewMemoryStore(10, time.Hour), fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}}, nil)
	task := a2atest.Send(t, e, a2atest.Msg("x"))
	var got []a2a.Event
	for ev, err := range e.OnResubscribeToTask(context.Background(), &a2a.TaskIDParams{ID: task.ID}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != 1 || got[0].(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Fatalf("resubscribe to a finished task yielded %v", got)
	}
}

func TestCancelWhileWorking(t *testing.T) {
	started := make(chan struct{})
	e := NewEngine(NewMemoryStore(10, time.Hour), fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil))
		close(started)
		<-ctx.Done()
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
		ev.Final = true
		return q.Write(context.WithoutCancel(ctx), ev)
	}}, nil)
	f := false
	p := a2atest.Msg("x")
	p.Config = &a2a.MessageSendConfig{Blocking: &f}
	task := a2atest.Send(t, e, p)
	<-started
	got, err := e.OnCancelTask(context.Background(), &a2a.TaskIDParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	if _, err := e.OnCancelTask(context.Background(), &a2a.TaskIDParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("second cancel: %v", err)
	}
	if _, err := e.OnCancelTask(context.Background(), &a2a.TaskIDParams{ID: "missing"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("cancel of unknown task: %v", err)
	}
}

func TestValidateSendParams(t *testing.T) {
	bad := []*a2a.MessageSendParams{
		nil,
		{},
		{Message: &a2a.Message{Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "x"}}}},
		{Message: &a2a.Message{ID: "m", Parts: a2a.ContentParts{a2a.TextPart{Text: "x"}}}},
		{Message: &a2a.Message{ID: "m", Role: a2a.MessageRoleUser}},
		{Message: &a2a.Message{ID: "m", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.DataPart{}}}},
	}
	for i, p := range bad {
		if err := validateSendParams(p); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("case %d: %v, want invalid params", i, err)
		}
	}
}

// racingCancelExec finishes a task itself inside Cancel, as a nested
// subagent that ends just as tasks/cancel reaches it does.
type racingCancelExec struct {
	fakeExec
	e *Engine
}

func (x *racingCancelExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	done := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	done.Final = true
	if err := x.e.Update(ctx, reqCtx.TaskID, done); err != nil {
		return err
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// A task that ends on its own while tasks/cancel reaches it is not
// cancelable (-32002), as if it had ended a moment earlier: not an internal
// error.
func TestCancelRacingTheEndOfANestedTask(t *testing.T) {
	x := &racingCancelExec{}
	e := NewEngine(NewMemoryStore(10, time.Hour), x, nil)
	x.e = e
	if err := e.OpenTask(context.Background(), &a2a.Task{ID: "nested", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.OnCancelTask(context.Background(), &a2a.TaskIDParams{ID: "nested"}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("cancel of a task that ended meanwhile: %v", err)
	}
	if got, _, _ := e.Store().Get(context.Background(), "nested"); got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state %s", got.Status.State)
	}
}
