package tasks

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/internal/admit"
)

// A task waiting for its caller's answer survives its runner. While its
// question waits, the executor keeps the record of its tree with the task
// (WaitRecorder, into a WaitingKeeper store): the question, each waiting
// subagent's payload and conversation. When the runner is lost (a restart, a
// replica gone), Recover finds the task input-required with a record: it is
// not lost. It stays input-required, with no process, live in this engine
// (the answer state every input-required task has, answer.go), and the
// executor (WaitResumer) waits for the answer there, then starts the tree
// again from the record with it. A record found on a task that is no longer
// input-required (the answer was taken, and the runner lost before it
// forgot the record) is forgotten, and the task is recovered as any other.

// WaitRecorder is implemented by the event queue of a task whose store
// keeps waiting records: RecordWaiting keeps rec with the task, durably,
// before it returns; nil forgets it. Over another store it does nothing.
type WaitRecorder interface {
	RecordWaiting(ctx context.Context, rec []byte) error
}

// RunAdmitter is implemented by the event queue of a task resumed from its
// waiting record: AdmitRun waits for a run slot of the service's admission
// (none is held while the task waits) and returns its release.
type RunAdmitter interface {
	AdmitRun(ctx context.Context) (release func(), err error)
}

// WaitResumer is implemented by an executor that resumes a task recovered
// while it waited: it waits for the answer (q implements Answers) within
// what is left of its input timeout, then runs the tree from rec (the
// waiting record) and payload (the retained request, nil when none) with
// it, and ends the task as a run does. A record it cannot use ends the task
// failed with a cause that names it.
type WaitResumer interface {
	ResumeWaiting(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, payload, rec []byte) error
}

// RecordWaiting implements WaitRecorder.
func (q retainingQueue) RecordWaiting(ctx context.Context, rec []byte) error {
	wk, ok := q.e.store.(WaitingKeeper)
	if !ok {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	if err := wk.KeepWaiting(ctx, q.lt.snapshot().ID, rec); err != nil {
		return fmt.Errorf("tasks: keep the waiting record: %w", err)
	}
	if s, ok := q.e.store.(Syncer); ok {
		return s.Sync(ctx)
	}
	return nil
}

// AdmitRun implements RunAdmitter.
func (q retainingQueue) AdmitRun(ctx context.Context) (func(), error) {
	if q.e.admission == nil {
		return func() {}, nil
	}
	t, err := q.e.admission.Enqueue(q.lt.owner, admit.Normal)
	if err != nil {
		return nil, fmt.Errorf("tasks: admit the resumed run: %w", err)
	}
	select {
	case <-t.Ready():
		return t.Done, nil
	case <-ctx.Done():
		t.Done()
		return nil, context.Cause(ctx)
	}
}

var (
	_ WaitRecorder = retainingQueue{}
	_ RunAdmitter  = retainingQueue{}
)

// resumeWaiting takes a claimed orphan that waits for its caller's answer
// with a waiting record: it stays input-required, live here, and its
// executor resumes it once the answer comes. It reports false (changing
// nothing but a stale record) for any other orphan.
func (e *Engine) resumeWaiting(ctx context.Context, d Durable, t *a2a.Task) (bool, error) {
	wk, ok := d.(WaitingKeeper)
	wr, ok2 := e.exec.(WaitResumer)
	if !ok || !ok2 {
		return false, nil
	}
	rec, err := wk.Waiting(ctx, t.ID)
	if err != nil {
		return false, fmt.Errorf("read the waiting record of task %s: %w", t.ID, err)
	}
	if rec == nil {
		return false, nil
	}
	if t.Status.State != a2a.TaskStateInputRequired || len(t.History) == 0 {
		if err := wk.KeepWaiting(ctx, t.ID, nil); err != nil {
			return false, fmt.Errorf("forget the stale waiting record of task %s: %w", t.ID, err)
		}
		return false, nil
	}
	payload, err := d.Retained(ctx, t.ID)
	if err != nil {
		return false, fmt.Errorf("read the payload of task %s: %w", t.ID, err)
	}
	_, owner, err := e.store.Get(ctx, t.ID)
	if err != nil {
		return false, fmt.Errorf("resume task %s: %w", t.ID, err)
	}
	l, err := e.beginLaunch()
	if err != nil { // draining
		return false, nil
	}
	execCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	targets, _ := e.store.ListPush(ctx, t.ID)
	lt := &liveTask{task: t, done: make(chan struct{}), cancelExec: cancel, owner: owner, push: len(targets) > 0}
	lt.mu.Lock()
	lt.noteStateLocked(t.Status.State) // its answer is taken as any input-required task's
	lt.mu.Unlock()
	reqCtx := &a2asrv.RequestContext{Message: t.History[0], TaskID: t.ID, ContextID: t.ContextID, StoredTask: t, Metadata: t.Metadata}
	e.log.Info("task waits for its answer: it resumes from its stored tree when the answer comes", "task_id", string(t.ID), "record_bytes", len(rec))
	l.start(execCtx, cancel, lt, reqCtx, func(ctx context.Context, q queue) error {
		return wr.ResumeWaiting(ctx, reqCtx, q.events(), payload, rec)
	})
	return true, nil
}
