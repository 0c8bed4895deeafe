package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
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
	// in its metadata (MetaAttempt); an orphan that cannot be rerun (a
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

// MetaAttempt is the task metadata key of a rerun task's attempt number (2
// for the run after the first); a task without it is on its first attempt.
const MetaAttempt = "agentd/attempt"

// MaxAttempts is how many times a task runs at most: once, and once again
// after its runner was lost.
const MaxAttempts = 2

// Recovery is what one Recover did.
type Recovery struct {
	Orphans int           // unfinished tasks whose runner was gone
	Failed  int           // ended failed
	Rerun   int           // started again
	Skipped int           // claimed first by another process
	Took    time.Duration // from the start of Recover until every orphan was resolved (reruns started)
}

// Recover resolves the orphans of a Durable store (tasks whose runner is
// gone: the process before this one on the same state, or a replica whose
// lease expired) by policy, then hands the push notifications still pending
// in the store to the pusher. No orphan is left working: each is claimed by
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
	for _, o := range orphans {
		claimed, err := d.Claim(ctx, o.Task.ID, o.Runner)
		if err != nil {
			return rec, fmt.Errorf("claim task %s: %w", o.Task.ID, err)
		}
		if !claimed {
			rec.Skipped++
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
	if e.pusher != nil {
		if err := e.pusher.Resume(ctx); err != nil {
			return rec, err
		}
	}
	rec.Took = time.Since(start)
	if rec.Orphans > 0 {
		e.log.Info("recovered orphaned tasks", "policy", string(policy), "orphans", rec.Orphans, "failed", rec.Failed,
			"rerun", rec.Rerun, "skipped", rec.Skipped, "took", rec.Took.String())
	}
	return rec, nil
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
	if err := e.store.Put(ctx, next); err != nil {
		return fmt.Errorf("fail orphaned task %s: %w", t.ID, err)
	}
	e.notifyPush(ctx, next, ev)
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

// Attempt returns a task's attempt number: MetaAttempt, else 1.
func Attempt(t *a2a.Task) int {
	switch v := t.Metadata[MetaAttempt].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	}
	return 1
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
	e.mu.Lock()
	if e.draining {
		e.mu.Unlock()
		return false, nil
	}
	e.wg.Add(1)
	e.mu.Unlock()
	ev := a2a.NewStatusUpdateEvent(t, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, t,
		a2a.TextPart{Text: fmt.Sprintf("agentd restarted while this task ran: running it again (attempt %d of %d)", attempt, MaxAttempts)}))
	ev.Metadata = map[string]any{MetaAttempt: attempt}
	next, err := Apply(t, ev)
	if err == nil {
		err = e.store.Put(ctx, next)
	}
	if err != nil {
		e.wg.Done()
		return false, fmt.Errorf("rerun task %s: %w", t.ID, err)
	}
	e.notifyPush(ctx, next, ev)
	execCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	lt := &liveTask{task: next, done: make(chan struct{}), cancelExec: cancel}
	e.mu.Lock()
	e.live[t.ID] = lt
	e.mu.Unlock()
	reqCtx := &a2asrv.RequestContext{Message: t.History[0], TaskID: t.ID, ContextID: t.ContextID, StoredTask: next, Metadata: t.Metadata}
	e.log.Info("rerunning task", "task_id", string(t.ID), "attempt", attempt)
	go e.run(execCtx, cancel, lt, reqCtx, func(ctx context.Context, q queue) error { return rr.Rerun(ctx, reqCtx, q, payload) })
	return true, nil
}
