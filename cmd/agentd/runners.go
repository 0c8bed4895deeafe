package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/delegate"
	"github.com/agentd/agentd/supervisor/trigger"
)

// rootRequest is what every run of a mode starts from: the payload (its scope
// is the tools listed when each run starts) and, for a workflow, its steps.
type rootRequest struct {
	payload  api.SpawnPayload
	workflow []supervisor.WorkflowStep
	tools    *toolServers
}

// request is the start request of one run for ev: a fresh scope, the
// trigger's seed slices after the payload's, and a run id derived from
// --run-id when one is set (RUNID-SEQ-ATTEMPT; else each run gets its own).
func (r rootRequest) request(ev trigger.Event) supervisor.StartRequest {
	p := r.payload
	p.Scope = r.tools.rootScope()
	p.Seed.Slices = append(append([]api.SeedSlice(nil), p.Seed.Slices...), ev.Seed...)
	if id := p.Telemetry.RunID; id != "" && ev.Seq > 0 {
		p.Telemetry.RunID = fmt.Sprintf("%s-%d-%d", id, ev.Seq, ev.Attempt)
	}
	return supervisor.StartRequest{Payload: p, Workflow: r.workflow}
}

// supRunner is the one-shot runner of `agentd run`: each run a tree of the
// supervisor.
type supRunner struct {
	sup  *supervisor.Supervisor
	root rootRequest
	log  *slog.Logger
}

func (s supRunner) Start(ctx context.Context, ev trigger.Event) (trigger.Run, error) {
	r, err := s.sup.Start(context.WithoutCancel(ctx), s.root.request(ev))
	if err != nil {
		return nil, err
	}
	s.log.Info("triggered run", append(ev.LogAttrs(), "task_id", r.Handle(), "run_id", r.Info().RunID)...)
	return supRun{r: r, sup: s.sup, done: r.TreeDone()}, nil
}

// supRun is a supervisor run as a trigger.Run: done once its whole tree has
// ended.
type supRun struct {
	r    *supervisor.Run
	sup  *supervisor.Supervisor
	done <-chan struct{}
}

func (s supRun) Done() <-chan struct{}       { return s.done }
func (s supRun) Result() api.SubagentResult  { <-s.done; return s.r.Result() }
func (s supRun) Outcome() supervisor.Outcome { <-s.done; return s.r.Outcome() }
func (s supRun) Cancel(reason string)        { s.sup.Cancel(s.r.Handle(), reason) }

// taskRunner is the runner of `agentd serve`: each run is an A2A task of the
// engine (tasks/get, ListTasks and a2a.Tree show it), with the trigger's
// event in its metadata, whose root is a local tree of the supervisor. It
// drives the task as the executor drives a message's: working, then the
// distillate artifact and the terminal status. The task belongs to the
// service (no caller): operators see it. Each run is admitted like a task a
// caller sends (admission, when set): it waits for a run slot and its root's
// process slot, as the caller named by its session (trigger:loop, ...), and
// holds them until its tree has ended.
type taskRunner struct {
	engine    *tasks.Engine
	sup       *supervisor.Supervisor
	root      rootRequest
	publicURL string
	instance  string
	lineages  *delegate.Lineages
	maxDepth  func() int
	log       *slog.Logger
	admission *admit.Controller // nil: runs start at once
}

func (t *taskRunner) Start(ctx context.Context, ev trigger.Event) (trigger.Run, error) {
	ticket, err := t.admit(ctx, ev)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started && ticket != nil {
			ticket.Done()
		}
	}()
	ctx = context.WithoutCancel(ctx)
	req := t.root.request(ev)
	id := a2a.NewTaskID()
	req.Handle = string(id)
	info := &a2a.Task{ID: id, ContextID: a2a.NewContextID()}
	meta := ev.Metadata()
	// The task's message is what the root was given: its objective, then
	// the trigger's seed slices (a reactive run's resource content).
	parts := a2a.ContentParts{a2a.TextPart{Text: req.Payload.Contract.Objective}}
	for _, sl := range ev.Seed {
		parts = append(parts, a2a.TextPart{Text: sl.Label + ":\n" + sl.Content.Text})
	}
	task := &a2a.Task{
		ID:        id,
		ContextID: info.ContextID,
		Status:    a2a.TaskStatus{State: a2a.TaskStateSubmitted},
		History:   []*a2a.Message{{ID: a2a.NewMessageID(), Role: a2a.MessageRoleUser, TaskID: id, ContextID: info.ContextID, Parts: parts}},
		Metadata:  meta,
	}
	if err := t.engine.OpenTask(ctx, task, id); err != nil {
		return nil, fmt.Errorf("open the task: %w", err)
	}
	r, err := t.sup.Start(ctx, req)
	if err != nil {
		res := api.SubagentResult{Status: api.StatusCrashed, Detail: "the run did not start: " + err.Error(), Distillate: api.InlineText("")}
		t.finish(ctx, info, res)
		return nil, err
	}
	runID := r.Info().RunID
	if t.lineages != nil {
		// Nested spawns to peers carry this agentd as the first hop.
		t.lineages.Set(runID, delegate.Lineage{Hops: []string{t.instance}, MaxDepth: t.maxDepth()})
	}
	working := a2a.NewStatusUpdateEvent(info, a2a.TaskStateWorking, nil)
	working.Metadata = maps.Clone(meta)
	working.Metadata[api.MetaRunID] = runID
	if err := t.engine.Update(ctx, id, working); err != nil {
		t.log.Warn("triggered task not marked working", "task_id", string(id), "err", err)
	}
	t.log.Info("triggered task", append(ev.LogAttrs(), "task_id", string(id), "run_id", runID)...)
	done := make(chan struct{})
	started = true
	go func() {
		<-r.TreeDone()
		if ticket != nil {
			ticket.Done()
		}
		if t.lineages != nil {
			t.lineages.Delete(runID)
		}
		t.finish(ctx, info, r.Result())
		close(done)
	}()
	return taskRun{r: r, sup: t.sup, done: done}, nil
}

// admit waits until admission gives the run its slots (nil without
// admission control). A run the queue has no room for waits the hint and
// asks again; it gives up when ctx ends or the service drains.
func (t *taskRunner) admit(ctx context.Context, ev trigger.Event) (*admit.Ticket, error) {
	if t.admission == nil {
		return nil, nil
	}
	for {
		ticket, err := t.admission.Enqueue(ev.Session, admit.Normal)
		var shed *admit.ShedError
		if errors.As(err, &shed) && shed.Reason != admit.ReasonClosed {
			t.log.Info("triggered run waits: the service is at capacity", append(ev.LogAttrs(), "retry_in", shed.RetryAfter.String())...)
			select {
			case <-time.After(shed.RetryAfter):
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if err != nil {
			return nil, err
		}
		select {
		case <-ticket.Ready():
			return ticket, nil
		case <-ctx.Done():
			ticket.Done() // out of the queue (or its slots back, if it just started)
			return nil, ctx.Err()
		case <-t.admission.Closed():
			ticket.Done()
			return nil, fmt.Errorf("the service drains: %w", admit.ErrShed)
		}
	}
}

// finish writes the artifact and the terminal status of a triggered task.
func (t *taskRunner) finish(ctx context.Context, info *a2a.Task, res api.SubagentResult) {
	if a2abind.HasArtifact(res) {
		art := &a2a.TaskArtifactUpdateEvent{TaskID: info.ID, ContextID: info.ContextID, Artifact: a2abind.DistillateArtifactAt(info.ID, res, t.publicURL), LastChunk: true}
		if err := t.engine.Update(ctx, info.ID, art); err != nil {
			t.log.Warn("triggered task artifact not recorded", "task_id", string(info.ID), "err", err)
		}
	}
	if err := t.engine.Update(ctx, info.ID, a2abind.FinalStatus(info, res)); err != nil {
		t.log.Warn("triggered task final state not recorded", "task_id", string(info.ID), "err", err)
	}
}

// taskRun is a triggered task's run: done once its task is final.
type taskRun struct {
	r    *supervisor.Run
	sup  *supervisor.Supervisor
	done <-chan struct{}
}

func (t taskRun) Done() <-chan struct{}       { return t.done }
func (t taskRun) Result() api.SubagentResult  { <-t.done; return t.r.Result() }
func (t taskRun) Outcome() supervisor.Outcome { <-t.done; return t.r.Outcome() }
func (t taskRun) Cancel(reason string)        { t.sup.Cancel(t.r.Handle(), reason) }
