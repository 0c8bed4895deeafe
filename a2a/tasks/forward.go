package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// Follow-ups across replicas. With a Forwarder store (replicas on one
// PostgreSQL), a follow-up message for a task another process runs, an
// answer to its question among them, is forwarded: stored for the runner
// (Forward), which takes it as if it had been sent there (followUp: the
// next turn, or the answer its executor waits for) and settles the entry;
// the sender waits for the outcome and answers its caller as the runner
// would have: the task with the message in its history (then, for a
// blocking send or a stream, it follows the task through the store), or the
// runner's refusal. An entry stays stored until the runner takes it; the
// runner is told again every forwardAgain while the sender waits.

// forwardAgain is how often a sender tells the runner again of a message
// it has not taken yet.
const forwardAgain = time.Second

// Refusal codes of a forwarded message: the a2a error it wraps.
var forwardCodes = []struct {
	code string
	err  error
}{
	{"invalid_params", a2a.ErrInvalidParams},
	{"unsupported", a2a.ErrUnsupportedOperation},
	{"not_found", a2a.ErrTaskNotFound},
	{"not_cancelable", a2a.ErrTaskNotCancelable},
	{"unavailable", ErrStoreUnavailable},
}

// refusalOf is the ForwardRefusal that carries err to the sender.
func refusalOf(err error) *ForwardRefusal {
	r := &ForwardRefusal{Code: "internal", Text: err.Error()}
	for _, c := range forwardCodes {
		if errors.Is(err, c.err) {
			r.Code = c.code
			r.Text = strings.TrimSuffix(r.Text, ": "+c.err.Error()) // Err wraps it again
			break
		}
	}
	return r
}

// Err is the refusal as the runner's error: its text, wrapping the a2a error
// of its code (a2a.ErrInternalError for one not known).
func (r *ForwardRefusal) Err() error {
	for _, c := range forwardCodes {
		if c.code == r.Code {
			return fmt.Errorf("%s (on the replica that runs the task): %w", r.Text, c.err)
		}
	}
	return fmt.Errorf("%s (on the replica that runs the task): %w", r.Text, a2a.ErrInternalError)
}

// forward hands msg, a follow-up for task t that another process runs, to
// that process and waits for its outcome: the task with msg in its history
// (settled: the caller follows it through the store), or the runner's
// refusal. push is registered once msg has joined the task; early
// (answerOnly) gets the task then.
func (e *Engine) forward(ctx context.Context, fw Forwarder, t *a2a.Task, msg *a2a.Message, push *PushTarget, early *earlySub) (*liveTask, error) {
	if msg.ContextID != "" && msg.ContextID != t.ContextID {
		return nil, fmt.Errorf("message.contextId %q is not task %s's context %q: %w", msg.ContextID, t.ID, t.ContextID, a2a.ErrInvalidParams)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	changed := fw.Watch(wctx, t.ID) // before the entry: its outcome is not missed
	seq, err := fw.Forward(ctx, t.ID, msg)
	if err != nil {
		return nil, fmt.Errorf("forward a message to task %s's replica: %w", t.ID, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), forwardAgain)
		defer cancel()
		if err := fw.DropForward(dctx, seq); err != nil {
			e.log.Warn("forwarded message's entry not deleted", "task_id", string(t.ID), "err", err)
		}
	}()
	e.log.Info("follow-up forwarded to the task's replica", "task_id", string(t.ID))
	again := time.NewTicker(forwardAgain)
	defer again.Stop()
	for {
		cur, err := e.getRetrying(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		if hasMessage(cur, msg.ID) {
			if push != nil {
				if _, err := e.store.SetPush(ctx, t.ID, *push); err != nil {
					return nil, err
				}
			}
			if early != nil && early.answerOnly {
				early.first = cur
			}
			return settled(cur), nil
		}
		refusal, exists, err := fw.ForwardOutcome(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("read the outcome of a message forwarded to task %s: %w", t.ID, err)
		}
		switch {
		case refusal != nil:
			return nil, refusal.Err()
		case cur.Status.State.Terminal():
			return nil, fmt.Errorf("task %s is %s and takes no more messages; send a new message (its referenceTaskIds may name this task): %w", t.ID, cur.Status.State, a2a.ErrUnsupportedOperation)
		case !exists:
			continue // taken since the read above: it is in the history now
		}
		select {
		case _, ok := <-changed:
			if !ok {
				return nil, fmt.Errorf("task %s: the store closed: %w", t.ID, a2a.ErrInternalError)
			}
		case <-again.C:
			if err := fw.Renotify(ctx, t.ID); err != nil {
				return nil, fmt.Errorf("forward a message to task %s's replica: %w", t.ID, err)
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// forwardedKey marks the context of a forwarded message's followUp: a task
// no longer live here refuses it rather than forwarding it on.
type forwardedKey struct{}

// runnerKnown reports whether task t has a runner to forward to: not a run
// waiting in the shared admission queue (it takes follow-ups once a replica
// runs it).
func (e *Engine) runnerKnown(ctx context.Context, t *a2a.Task) bool {
	sq, ok := e.store.(SharedQueue)
	if !ok {
		return true
	}
	runner, err := sq.Runner(ctx, t.ID)
	return err != nil || runner != "" || t.Status.State != a2a.TaskStateSubmitted
}

// serveForwards takes the messages other processes forward to the tasks
// this one runs, until the store closes the channel.
func (e *Engine) serveForwards(fw Forwarder) {
	for id := range fw.Forwarded() {
		ids := []a2a.TaskID{id}
		if id == "" {
			ids = e.liveIDs()
		}
		for _, id := range ids {
			e.takeForwarded(fw, id)
		}
	}
}

// liveIDs returns the ids of the tasks live here.
func (e *Engine) liveIDs() []a2a.TaskID {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]a2a.TaskID, 0, len(e.live))
	for id := range e.live {
		out = append(out, id)
	}
	return out
}

// takeForwarded takes the messages forwarded to task id, if it runs here:
// each joins the task as a follow-up sent here would (or is refused), and
// its entry is settled.
func (e *Engine) takeForwarded(fw Forwarder, id a2a.TaskID) {
	if lt := e.getLive(id); lt == nil || lt.settled {
		return // not ours, or ended: its sender finds out from the store
	}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), forwardedKey{}, true), e.storeWait+forwardAgain)
	defer cancel()
	msgs, err := fw.PendingForwards(ctx, id)
	if err != nil {
		e.log.Warn("forwarded messages not read", "task_id", string(id), "err", err)
		return
	}
	for _, fm := range msgs {
		var refusal *ForwardRefusal
		if _, err := e.followUp(ctx, fm.Message, nil, nil); err != nil {
			refusal = refusalOf(err)
			e.log.Info("forwarded follow-up refused", "task_id", string(id), "err", err)
		} else {
			e.log.Info("forwarded follow-up taken", "task_id", string(id))
			if e.followedHook != nil {
				e.followedHook()
			}
		}
		if err := fw.SettleForward(ctx, id, fm.Seq, refusal); err != nil {
			e.log.Warn("forwarded message's outcome not stored", "task_id", string(id), "err", err)
		}
	}
}
