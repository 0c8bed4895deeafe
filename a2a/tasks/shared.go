package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
)

// With a Shared store (replicas on one database) a task runs in the process
// that accepted it, and every other process answers for it through the
// store: a stream or a blocking send follows its stored snapshots (Watch),
// tasks/cancel asks its runner to cancel it (RequestCancel), a follow-up is
// forwarded to its runner (Forwarder, forward.go), and the engine serves the
// cancel requests and follow-ups other processes send for its own tasks.

// sharedFor returns the Shared store when t is run by another process: not
// live here, not terminal.
func (e *Engine) sharedFor(t *a2a.Task) (Shared, bool) {
	sh, ok := e.store.(Shared)
	if !ok || t.Status.State.Terminal() || e.getLive(t.ID) != nil {
		return nil, false
	}
	return sh, true
}

// serveCancels cancels the tasks other processes ask this one to cancel,
// until the store closes the channel.
func (e *Engine) serveCancels(sh Shared) {
	for id := range sh.Cancels() {
		lt := e.getLive(id)
		if lt == nil {
			continue // not ours, or already ended
		}
		if lt.cancelExec != nil {
			lt.cancelExec(errCancelRequested)
			continue
		}
		snap := lt.snapshot()
		reqCtx := &a2asrv.RequestContext{TaskID: snap.ID, ContextID: snap.ContextID, StoredTask: snap}
		if err := e.exec.Cancel(context.Background(), reqCtx, queue{e: e, lt: lt}); err != nil && !errors.Is(err, errTaskFinished) {
			e.log.Warn("cancel requested by another replica failed", "task_id", string(id), "err", err)
		}
	}
}

// followRemote streams a task another process runs: its snapshot, then the
// events its stored changes amount to, until it ends or ctx does.
func (e *Engine) followRemote(ctx context.Context, sh Shared, id a2a.TaskID, yield func(a2a.Event, error) bool) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	changed := sh.Watch(ctx, id) // before the read: no change is missed
	// The first read rides out a short outage as the later ones do: the
	// database may stop right after the watch is registered.
	cur, err := e.getRetrying(ctx, id)
	if err != nil {
		yield(nil, err)
		return
	}
	if !yield(cur, nil) {
		return
	}
	for !cur.Status.State.Terminal() {
		select {
		case _, ok := <-changed:
			if !ok {
				return
			}
		case <-ctx.Done():
			return
		}
		next, err := e.getRetrying(ctx, id)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, ev := range changes(cur, next) {
			if !yield(ev, nil) {
				return
			}
		}
		cur = next
	}
}

// getRetrying reads a task another process runs, retrying for up to the
// store wait while the store is unavailable (a database restarting): a
// follower rides out a short outage, and its caller is answered
// ErrStoreUnavailable within the store wait of a longer one.
func (e *Engine) getRetrying(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	wait := 50 * time.Millisecond
	deadline := e.answerBy()
	for {
		t, err := boundedRead(e, ctx, deadline, "read task "+string(id), func(ctx context.Context) (*a2a.Task, error) {
			t, _, err := e.store.Get(ctx, id)
			return t, err
		})
		if err == nil || !errors.Is(err, ErrStoreUnavailable) || time.Now().Add(wait).After(deadline) {
			return t, err
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// changes are the events that turn snapshot old into new: an artifact update
// for each new or changed artifact, then a status update if the status
// changed (final once terminal).
func changes(old, new *a2a.Task) []a2a.Event {
	var out []a2a.Event
	for _, a := range new.Artifacts {
		i := slices.IndexFunc(old.Artifacts, func(o *a2a.Artifact) bool { return o.ID == a.ID })
		if i >= 0 && len(old.Artifacts[i].Parts) == len(a.Parts) {
			continue
		}
		out = append(out, &a2a.TaskArtifactUpdateEvent{TaskID: new.ID, ContextID: new.ContextID, Artifact: a, LastChunk: true})
	}
	if old.Status.State != new.Status.State || !StatusTime(old).Equal(StatusTime(new)) {
		ev := a2a.NewStatusUpdateEvent(new, new.Status.State, new.Status.Message)
		ev.Status = new.Status
		ev.Final = new.Status.State.Terminal()
		out = append(out, ev)
	}
	return out
}

// waitRemote waits until a task another process runs ends or is
// interrupted (input-required: a blocking send returns it, as it does a
// task run here), timeout fires or ctx ends, and returns its snapshot then.
func (e *Engine) waitRemote(ctx context.Context, sh Shared, id a2a.TaskID, timeout <-chan time.Time) (*a2a.Task, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	changed := sh.Watch(ctx, id)
	for {
		t, err := e.getRetrying(ctx, id)
		if err != nil {
			return nil, err
		}
		if t.Status.State.Terminal() || interruptedState(t.Status.State) {
			return t, nil
		}
		select {
		case _, ok := <-changed:
			if !ok {
				return t, nil
			}
		case <-timeout:
			return t, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// cancelRemote asks the process running a task to cancel it and waits for
// the task to end.
func (e *Engine) cancelRemote(ctx context.Context, sh Shared, t *a2a.Task) (*a2a.Task, error) {
	if sq, ok := e.sharedQueue(); ok {
		// Waiting in the shared queue, it is run by no one: cancelled here.
		if done, removed, err := e.cancelQueued(ctx, sq, t); removed || err != nil {
			return done, err
		}
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	changed := sh.Watch(ctx, t.ID)
	if err := sh.RequestCancel(ctx, t.ID); err != nil {
		return nil, fmt.Errorf("cancel task %s on its replica: %w", t.ID, err)
	}
	// A runner lost before it took the request never ends the task, and the
	// replica that takes it over (--recover rerun runs it again) was not
	// asked: the request is made again every cancelAgain until the task
	// ends.
	again := time.NewTicker(cancelAgain)
	defer again.Stop()
	for {
		cur, err := e.getRetrying(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		if cur.Status.State.Terminal() {
			return cur, nil
		}
		select {
		case _, ok := <-changed:
			if !ok {
				return nil, fmt.Errorf("task %s: the store closed: %w", t.ID, a2a.ErrInternalError)
			}
		case <-again.C:
			if err := sh.RequestCancel(ctx, t.ID); err != nil {
				return nil, fmt.Errorf("cancel task %s on its replica: %w", t.ID, err)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// cancelAgain is how often a cancel through another replica is asked again
// while the task runs on.
const cancelAgain = time.Second

// elsewhere is the answer to a follow-up message for a task another process
// runs (or a task waiting in the shared queue) when the store cannot forward
// it (forward.go): only its runner takes follow-ups (it holds the executor
// that takes them as the next turn), so the error names it; the client
// sends the message to that replica, or waits for the task to end and sends
// a new message.
func (e *Engine) elsewhere(ctx context.Context, t *a2a.Task) error {
	runner := ""
	if sq, ok := e.store.(SharedQueue); ok {
		runner, _ = sq.Runner(ctx, t.ID)
	}
	if runner == "" && t.Status.State == a2a.TaskStateSubmitted {
		return fmt.Errorf("task %s waits in the admission queue shared by this service's replicas and takes follow-up messages once a replica runs it: %w", t.ID, a2a.ErrUnsupportedOperation)
	}
	if runner == "" {
		return fmt.Errorf("task %s runs on another replica of this service, which alone takes its follow-up messages: %w", t.ID, a2a.ErrUnsupportedOperation)
	}
	return fmt.Errorf("task %s runs on replica %s of this service, which alone takes its follow-up messages (send it there, or a new message once the task ends): %w", t.ID, runner, a2a.ErrUnsupportedOperation)
}
