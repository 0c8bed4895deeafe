package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
)

// RecoverPolicy says what Recover does with a task whose runner was lost.
type RecoverPolicy string

// The recovery policies.
const (
	// RecoverFail ends every orphan failed: its executor's LostMetadata
	// (in agentd: agentd/status crashed, agentd/cause supervisor_lost).
	RecoverFail RecoverPolicy = "fail"
	// RecoverRerun runs a root task again, once, from the payload its
	// executor retained, under the same task id, with the attempt number
	// in its metadata (api.MetaAttempt); an orphan that cannot be rerun (a
	// nested task, one without a payload, one already rerun) fails.
	RecoverRerun RecoverPolicy = "rerun"
)

// ParseRecoverPolicy parses "fail" or "rerun".
func ParseRecoverPolicy(s string) (RecoverPolicy, error) {
	switch p := RecoverPolicy(s); p {
	case RecoverFail, RecoverRerun:
		return p, nil
	}
	return "", fmt.Errorf("tasks: recovery policy %q: want fail or rerun", s)
}

// MaxAttempts is how many times a task runs at most: once, and once again
// after its runner was lost.
const MaxAttempts = 2

// Recovery is what one Recover did.
type Recovery struct {
	Orphans  int           // unfinished tasks whose runner was gone
	Failed   int           // ended failed
	Rerun    int           // started again
	Requeued int           // still waiting for admission when their runner was lost: queued again
	Waiting  int           // waiting for their caller's answer: they wait on, and resume from their stored trees
	Skipped  int           // claimed first by another process
	Took     time.Duration // from the start of Recover until every orphan was resolved (reruns started)
}

// Recover resolves the orphans of a Durable store (tasks whose runner is
// gone: the process before this one on the same state, or a replica whose
// lease expired) by policy, after it has handed the push notifications still
// pending in the store to the pusher. No orphan is left working: each is claimed by
// this engine, then failed or started again. With a store that is not
// Durable it does nothing. It is safe to call again (another replica's lease
// may expire later).
func (e *Engine) Recover(ctx context.Context, policy RecoverPolicy) (Recovery, error) {
	start := time.Now()
	var rec Recovery
	d, ok := e.store.(Durable)
	if !ok {
		return rec, nil
	}
	orphans, err := d.Orphans(ctx)
	if err != nil {
		return rec, fmt.Errorf("list orphaned tasks: %w", err)
	}
	rec.Orphans = len(orphans)
	// The notifications the orphans' runners had not delivered are queued
	// first (after the orphans are listed: their runners' are among them),
	// so that a webhook is told of a task's events in order, the end its
	// recovery gives it last (it was told that end first, then the events
	// before it).
	if e.pusher != nil {
		if err := e.pusher.Resume(ctx); err != nil {
			return rec, err
		}
	}
	for _, o := range orphans {
		if e.leaveOrphan != nil && e.leaveOrphan(o.Task) {
			rec.Orphans--
			continue
		}
		if lt := e.getLive(o.Task.ID); lt != nil {
			// Still live here although another runner had it: this process
			// was taken over (its lease lapsed) and is about to take the task
			// back. The stale run stops first.
			e.fence(lt, ErrFenced)
		}
		claimed, err := d.Claim(ctx, o.Task.ID, o.Runner)
		if err != nil {
			return rec, fmt.Errorf("claim task %s: %w", o.Task.ID, err)
		}
		if !claimed {
			rec.Skipped++
			continue
		}
		// A task waiting for its caller's answer lost no work: it waits on,
		// and resumes from its stored tree (waiting.go), whatever the policy.
		if resumed, err := e.resumeWaiting(ctx, d, o.Task); err != nil {
			return rec, err
		} else if resumed {
			rec.Waiting++
			continue
		}
		// A task still waiting in the admission queue never ran: nothing of
		// it was lost, and it queues again, whatever the policy.
		if requeued, err := e.requeue(ctx, d, o.Task); err != nil {
			return rec, err
		} else if requeued {
			rec.Requeued++
			continue
		}
		if policy == RecoverRerun {
			started, err := e.rerun(ctx, d, o.Task)
			if err != nil {
				return rec, err
			}
			if started {
				rec.Rerun++
				continue
			}
		}
		if err := e.failLost(ctx, o.Task); err != nil {
			return rec, err
		}
		rec.Failed++
	}
	rec.Took = time.Since(start)
	if rec.Orphans > 0 {
		e.log.Info("recovered orphaned tasks", "policy", string(policy), "orphans", rec.Orphans, "failed", rec.Failed,
			"rerun", rec.Rerun, "requeued", rec.Requeued, "waiting", rec.Waiting, "skipped", rec.Skipped, "took", rec.Took.String())
	}
	return rec, nil
}

// WithOrphanFilter makes Recover leave alone the orphans leave reports true
// for: tasks of the store that another program resolves itself (in agentd,
// the records of `agentd run --run-id` sharing a state directory).
func WithOrphanFilter(leave func(*a2a.Task) bool) EngineOption {
	return func(e *Engine) { e.leaveOrphan = leave }
}

// LostText is the status message of a task failed because its runner was
// lost.
const LostText = "agentd lost the process tree running this task (the service restarted, or its replica went away)"

// failLost ends an orphan failed, labelled by the executor's LostMetadata.
func (e *Engine) failLost(ctx context.Context, t *a2a.Task) error {
	ev := a2a.NewStatusUpdateEvent(t, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, t, a2a.TextPart{Text: LostText}))
	ev.Final = true
	if lm, ok := e.exec.(LostMetadata); ok {
		ev.Metadata = lm.LostMetadata()
	}
	next, err := Apply(t, ev)
	if err != nil {
		return err
	}
	if err := e.putEnd(ctx, next, ev); err != nil {
		return fmt.Errorf("fail orphaned task %s: %w", t.ID, err)
	}
	return nil
}

// putEnd stores the terminal snapshot of a task this engine does not drive
// (an orphan's, a queued task's) and queues its end (ev) for the task's
// webhooks: journaled in the write's transaction where the store can
// (EndJournal).
func (e *Engine) putEnd(ctx context.Context, t *a2a.Task, ev a2a.Event) error {
	if e.ends != nil {
		seq, err := e.ends.PutEnd(ctx, t)
		if err == nil && seq > 0 {
			e.pusher.EnqueueJournaled(t.ID, ev, t, seq)
		}
		return err
	}
	if err := e.store.Put(ctx, t); err != nil {
		return err
	}
	e.notifyPush(ctx, t, ev)
	return nil
}

// notifyPush queues an event of a task for its webhooks, if it has any.
func (e *Engine) notifyPush(ctx context.Context, t *a2a.Task, ev a2a.Event) {
	if e.pusher == nil {
		return
	}
	if targets, _ := e.store.ListPush(ctx, t.ID); len(targets) > 0 {
		e.pusher.Enqueue(t.ID, ev, t)
	}
}

// Attempt returns a task's attempt number: api.MetaAttempt, else 1.
func Attempt(t *a2a.Task) int {
	if n, ok := MetaInt(t.Metadata[api.MetaAttempt]); ok {
		return n
	}
	return 1
}

// MetaInt reads a number of task metadata: an int as the engine wrote it,
// or a float64 as JSON decoded it; false for anything else.
func MetaInt(v any) (int, bool) {
	switch v := v.(type) {
	case int:
		return v, true
	case int64:
		return int(v), true
	case float64:
		return int(v), true
	}
	return 0, false
}

// requeue puts an orphan that was waiting in the admission queue (submitted,
// with a queue position, its executor never started) back in the queue, to
// run from its message as it would have; it reports false for any other
// orphan.
func (e *Engine) requeue(ctx context.Context, d Durable, t *a2a.Task) (bool, error) {
	if _, queued := t.Metadata[api.MetaQueuePosition]; !queued || t.Status.State != a2a.TaskStateSubmitted || len(t.History) == 0 {
		return false, nil
	}
	if p, err := d.Retained(ctx, t.ID); err != nil || p != nil {
		return false, err
	}
	_, owner, err := e.store.Get(ctx, t.ID)
	if err != nil {
		return false, fmt.Errorf("requeue task %s: %w", t.ID, err)
	}
	if sq, ok := e.sharedQueue(); ok {
		return true, e.requeueShared(ctx, sq, t, owner)
	}
	var ticket *admit.Ticket
	if e.admission != nil {
		prio, _ := admit.ParsePriority(fmt.Sprint(t.Metadata[api.MetaPriority]))
		if ticket, err = e.admission.Enqueue(owner, prio); err != nil {
			e.log.Warn("queued task not queued again: no room in the admission queue", "task_id", string(t.ID), "err", err)
			return false, nil
		}
	}
	l, err := e.beginLaunch()
	if err != nil { // draining
		if ticket != nil {
			ticket.Done()
		}
		return false, nil
	}
	next := *t
	next.Metadata = admissionMetadata(t.Metadata, ticket)
	execCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	targets, _ := e.store.ListPush(ctx, t.ID)
	lt := &liveTask{task: &next, done: make(chan struct{}), cancelExec: cancel, ticket: ticket, owner: owner, push: len(targets) > 0}
	reqCtx := &a2asrv.RequestContext{Message: t.History[0], TaskID: t.ID, ContextID: t.ContextID, Metadata: t.Metadata}
	e.log.Info("queued task queued again", "task_id", string(t.ID))
	l.start(execCtx, cancel, lt, reqCtx, nil)
	return true, nil
}

// rerun starts an orphan again from its retained payload; it reports false
// (and changes nothing) when the task cannot be rerun.
func (e *Engine) rerun(ctx context.Context, d Durable, t *a2a.Task) (bool, error) {
	rr, ok := e.exec.(Rerunner)
	attempt := Attempt(t) + 1
	if !ok || attempt > MaxAttempts || len(t.History) == 0 {
		return false, nil
	}
	payload, err := d.Retained(ctx, t.ID)
	if err != nil && !errors.Is(err, a2a.ErrTaskNotFound) {
		return false, fmt.Errorf("read the payload of task %s: %w", t.ID, err)
	}
	if payload == nil {
		return false, nil
	}
	// A rerun waits for admission like a new task (at normal priority, as
	// its creator's); one the queue has no room for fails instead.
	_, owner, err := e.store.Get(ctx, t.ID)
	if err != nil {
		return false, fmt.Errorf("rerun task %s: %w", t.ID, err)
	}
	var ticket *admit.Ticket
	if e.admission != nil {
		if ticket, err = e.admission.Enqueue(owner, admit.Normal); err != nil {
			e.log.Warn("orphaned task not rerun: no room in the admission queue", "task_id", string(t.ID), "err", err)
			return false, nil
		}
	}
	l, err := e.beginLaunch()
	if err != nil { // draining
		if ticket != nil {
			ticket.Done()
		}
		return false, nil
	}
	ev := a2a.NewStatusUpdateEvent(t, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, t,
		a2a.TextPart{Text: fmt.Sprintf("agentd restarted while this task ran: running it again (attempt %d of %d)", attempt, MaxAttempts)}))
	ev.Metadata = map[string]any{api.MetaAttempt: attempt}
	next, err := Apply(t, ev)
	if err == nil {
		err = e.store.Put(ctx, next)
	}
	if err != nil {
		l.abort()
		if ticket != nil {
			ticket.Done()
		}
		return false, fmt.Errorf("rerun task %s: %w", t.ID, err)
	}
	e.notifyPush(ctx, next, ev)
	execCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	targets, _ := e.store.ListPush(ctx, t.ID)
	lt := &liveTask{task: next, done: make(chan struct{}), cancelExec: cancel, ticket: ticket, owner: owner, push: len(targets) > 0}
	reqCtx := &a2asrv.RequestContext{Message: t.History[0], TaskID: t.ID, ContextID: t.ContextID, StoredTask: next, Metadata: t.Metadata}
	e.log.Info("rerunning task", "task_id", string(t.ID), "attempt", attempt)
	l.start(execCtx, cancel, lt, reqCtx, func(ctx context.Context, q queue) error { return rr.Rerun(ctx, reqCtx, q.events(), payload) })
	return true, nil
}
