package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/store/sqlite"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/supervisor"
)

// runRecord keeps a once run of `agentd run --run-id X --state-dir D` as a
// task of D's store, id "run-X" (RecordID): created submitted with the root's
// payload retained, working once the root starts, then its distillate
// artifact and terminal status. A second `agentd run` with the same run id
// finds it and does not run it again:
//
//   - ended: its stored result is printed and its code is the exit code;
//   - unfinished, its agentd alive: refused (exit 2), the run is under way;
//   - unfinished, its agentd gone (killed mid-run): resolved by --recover,
//     fail (crashed, cause supervisor_lost, exit 1) or rerun (the root runs
//     again once from the retained payload, agentd/attempt 2);
//   - unfinished, interrupted (its agentd drained it on a signal, then
//     exited: api.MetaInterrupted): the root runs again from the retained
//     payload, whatever --recover says.
type runRecord struct {
	store       *sqlite.Store
	runID       string
	policy      tasks.RecoverPolicy
	instruction string
	log         *slog.Logger
	task        *a2a.Task // the record's current snapshot
}

// RecordID is the task id of the run with this run id in a state directory.
func RecordID(runID string) a2a.TaskID { return a2a.TaskID("run-" + runID) }

// begin reads the record: for a run to start (a new one, or a rerun) it
// returns the start request and done false; for a run that has ended (or
// was just failed by --recover fail) its result and done true.
func (r *runRecord) begin(ctx context.Context, req supervisor.StartRequest) (_ supervisor.StartRequest, _ api.SubagentResult, done bool, _ error) {
	id := RecordID(r.runID)
	t, _, err := r.store.Get(ctx, id)
	switch {
	case errors.Is(err, a2a.ErrTaskNotFound):
		return req, api.SubagentResult{}, false, r.create(ctx, req)
	case err != nil:
		return req, api.SubagentResult{}, false, fmt.Errorf("read run %s: %w", r.runID, err)
	case t.Status.State.Terminal():
		r.log.Info("run ended before: printing its stored result", "run_id", r.runID, "task_id", string(id), "state", string(t.Status.State))
		return req, storedResult(t), true, nil
	}
	busy := cli.UsageError("--run-id %s: the run is under way in another agentd on this --state-dir", r.runID)
	orphans, err := r.store.Orphans(ctx)
	if err != nil {
		return req, api.SubagentResult{}, false, err
	}
	runner := ""
	for _, o := range orphans {
		if o.Task.ID == id {
			runner = o.Runner
		}
	}
	if runner == "" {
		return req, api.SubagentResult{}, false, busy
	}
	if ok, err := r.store.Claim(ctx, id, runner); err != nil || !ok {
		if err != nil {
			return req, api.SubagentResult{}, false, err
		}
		return req, api.SubagentResult{}, false, busy
	}
	r.task = t
	if t.Metadata[api.MetaInterrupted] == true {
		// The process was stopped, the work did not end: the run runs again,
		// whatever --recover says (that policy is for a lost agentd, whose
		// tree may have done anything before it died). An interruption is
		// not a crash: it leaves agentd/attempt as it was and does not count
		// against tasks.MaxAttempts (a run interrupted by every drain of its
		// node still runs on its re-trigger; only signals from outside
		// interrupt it, no crash loop can). api.MetaInterruptions counts them.
		payload, err := r.store.Retained(ctx, id)
		if err != nil {
			return req, api.SubagentResult{}, false, err
		}
		if err := json.Unmarshal(payload, &req.Payload); err == nil && len(payload) > 0 {
			n, _ := tasks.MetaInt(t.Metadata[api.MetaInterruptions])
			n++
			r.log.Info("the run was interrupted by a signal before it ended: running it again", "run_id", r.runID, "attempt", tasks.Attempt(t), "interruptions", n)
			ev := a2a.NewStatusUpdateEvent(t, a2a.TaskStateSubmitted, a2a.NewMessageForTask(a2a.MessageRoleAgent, t,
				a2a.TextPart{Text: fmt.Sprintf("the run was interrupted by a signal before it ended: running it again (interruption %d)", n)}))
			ev.Metadata = map[string]any{api.MetaInterrupted: false, api.MetaInterruptions: n}
			return req, api.SubagentResult{}, false, r.apply(ctx, ev)
		}
		// Without its payload it cannot run again: --recover resolves it.
	}
	attempt := tasks.Attempt(t) + 1
	if r.policy == tasks.RecoverRerun && attempt <= tasks.MaxAttempts {
		payload, err := r.store.Retained(ctx, id)
		if err != nil {
			return req, api.SubagentResult{}, false, err
		}
		if err := json.Unmarshal(payload, &req.Payload); err == nil && len(payload) > 0 {
			r.log.Info("the run's agentd was lost: running it again", "run_id", r.runID, "attempt", attempt)
			ev := a2a.NewStatusUpdateEvent(t, a2a.TaskStateSubmitted, a2a.NewMessageForTask(a2a.MessageRoleAgent, t,
				a2a.TextPart{Text: fmt.Sprintf("the agentd running this run was lost: running it again (attempt %d of %d)", attempt, tasks.MaxAttempts)}))
			ev.Metadata = map[string]any{api.MetaAttempt: attempt}
			return req, api.SubagentResult{}, false, r.apply(ctx, ev)
		}
	}
	r.log.Info("the run's agentd was lost: the run failed", "run_id", r.runID, "recover", string(r.policy))
	res := api.SubagentResult{Status: api.StatusCrashed, Cause: api.CauseSupervisorLost, Detail: tasks.LostText, Distillate: api.InlineText("")}
	r.finish(ctx, res)
	return req, res, true, nil
}

// create stores a new record, submitted, with the root's payload.
func (r *runRecord) create(ctx context.Context, req supervisor.StartRequest) error {
	id := RecordID(r.runID)
	info := &a2a.Task{ID: id, ContextID: a2a.NewContextID()}
	t := &a2a.Task{
		ID:        id,
		ContextID: info.ContextID,
		Status:    a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: nowUTC()},
		History: []*a2a.Message{{ID: string(id), Role: a2a.MessageRoleUser, TaskID: id, ContextID: info.ContextID,
			Parts: a2a.ContentParts{a2a.TextPart{Text: req.Payload.Contract.Objective}}}},
		Metadata: map[string]any{api.MetaRunID: r.runID},
	}
	if err := r.store.Create(ctx, t, ""); err != nil {
		var dup *tasks.DuplicateError
		if errors.As(err, &dup) || !errors.Is(err, tasks.ErrStoreUnavailable) {
			return cli.UsageError("--run-id %s: the run is under way in another agentd on this --state-dir", r.runID)
		}
		return fmt.Errorf("record run %s: %w", r.runID, err)
	}
	r.task = t
	payload, err := json.Marshal(req.Payload)
	if err == nil {
		err = r.store.Retain(ctx, id, payload)
	}
	if err != nil {
		return fmt.Errorf("record run %s: %w", r.runID, err)
	}
	return nil
}

// started marks the record working once the root has started.
func (r *runRecord) started(ctx context.Context, runID string) {
	ev := a2a.NewStatusUpdateEvent(r.task, a2a.TaskStateWorking, nil)
	ev.Metadata = map[string]any{api.MetaRunID: runID}
	if err := r.apply(ctx, ev); err != nil {
		r.log.Warn("run not recorded as working", "run_id", r.runID, "err", err)
	}
}

// finish records the run's distillate and terminal status.
func (r *runRecord) finish(ctx context.Context, res api.SubagentResult) {
	var err error
	if a2abind.HasArtifact(res) {
		err = r.apply(ctx, &a2a.TaskArtifactUpdateEvent{TaskID: r.task.ID, ContextID: r.task.ContextID, Artifact: a2abind.DistillateArtifact(r.task.ID, res), LastChunk: true})
	}
	if err == nil {
		err = r.apply(ctx, a2abind.FinalStatus(r.task, res))
	}
	if err != nil {
		r.log.Warn("run result not recorded: the next run with this id resolves it by --recover", "run_id", r.runID, "err", err)
	}
}

// drained records the end of a run drained on the first signal (sig, the
// cause of the run's context) while its root ran. A root that completed
// during the drain has its result recorded; any other end is the drain's
// doing (cancelled, or killed by the kill ladder or a second signal), not
// the run's: the record is stored back submitted, api.MetaInterrupted, with
// its attempt as it was and without the drained result, for the next run
// with its id to run it again. Without a signal (ctx cancelled otherwise)
// the result is recorded as it is.
func (r *runRecord) drained(ctx context.Context, res api.SubagentResult) {
	var sig signalled
	if res.Status == api.StatusCompleted || !errors.As(context.Cause(ctx), &sig) {
		r.finish(ctx, res)
		return
	}
	ev := a2a.NewStatusUpdateEvent(r.task, a2a.TaskStateSubmitted, a2a.NewMessageForTask(a2a.MessageRoleAgent, r.task,
		a2a.TextPart{Text: fmt.Sprintf("the run was interrupted by %s before it ended (drained %s): the next agentd run with this run id runs it again", signalName(sig.sig), res.Status)}))
	ev.Metadata = map[string]any{api.MetaInterrupted: true}
	if err := r.apply(ctx, ev); err != nil {
		r.log.Warn("run interruption not recorded: the next run with this id resolves it by --recover", "run_id", r.runID, "err", err)
		return
	}
	r.log.Info("the run was interrupted by a signal: recorded for the next run with this id to run it again", "run_id", r.runID, "signal", signalName(sig.sig))
}

// signalName is SIGTERM, SIGINT or SIGHUP, else the signal's description.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	return sig.String()
}

func nowUTC() *time.Time {
	t := time.Now().UTC()
	return &t
}

// apply folds an event into the record and stores it.
func (r *runRecord) apply(ctx context.Context, ev a2a.Event) error {
	next, err := tasks.Apply(r.task, ev)
	if err != nil {
		return err
	}
	if err := r.store.Put(context.WithoutCancel(ctx), next); err != nil {
		return err
	}
	r.task = next
	return nil
}

// storedResult is the result a record holds: its status and cause from
// metadata, its distillate from its artifact, its detail from the status
// message.
func storedResult(t *a2a.Task) api.SubagentResult {
	res := a2abind.ResultFromTask(t, true)
	res.Detail = strings.TrimPrefix(res.Detail, string(res.Status)+": ")
	if res.Detail == string(res.Status) {
		res.Detail = ""
	}
	return res
}
