package a2abind

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor/delegate"
)

// A task whose question waits survives its runner (tasks/waiting.go): when
// the root's question is posed on a task of a store that keeps waiting
// records, the tree's record (supervisor.Run.Waiting: every waiting
// subagent's payload and conversation) is kept with the task before the
// task goes input-required, and forgotten once the wait ends. Recovered, the
// task waits on with no process; its answer starts the tree again from the
// record (ResumeWaiting), and the task goes on as its first turn would have.

// recordWaiting keeps the record of run's tree with the task while it is a
// waiting tree, and returns the function that stops following the tree and
// forgets the record. The record follows the tree: one that is not a
// waiting tree when the question is posed (a subagent still works) is
// stored as soon as it becomes one (the working subagent ends, or waits on
// the root's question too), and stored again when it changes (a subagent
// ends). It returns nil when the store keeps no records.
func (x *Executor) recordWaiting(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, run delegate.Run) func() {
	wr, ok := q.(tasks.WaitRecorder)
	wrun, ok2 := run.(delegate.WaitingRun)
	if !ok || !ok2 {
		return nil
	}
	var last []byte // the record kept, its time left out; nil when none
	keep := func(first bool) {
		w, ok := wrun.Waiting()
		if !ok {
			if first {
				x.cfg.Log.InfoContext(ctx, "question not stored yet: a subagent of the tree is not waiting on it (it is stored when every one waits or has ended; a restart before would lose the task)", "task_id", string(reqCtx.TaskID))
			}
			return
		}
		at := w.At
		w.At = time.Time{}
		key, err := json.Marshal(w)
		if err != nil || bytes.Equal(key, last) {
			return
		}
		w.At = at
		b, err := json.Marshal(w)
		if err == nil {
			err = wr.RecordWaiting(ctx, b)
		}
		if err != nil {
			x.cfg.Log.WarnContext(ctx, "question not stored: a restart now would lose the task", "task_id", string(reqCtx.TaskID), "err", err)
			return
		}
		ended := 0
		for _, n := range w.Nodes {
			if n.Ended != nil {
				ended++
			}
		}
		last = key
		x.cfg.Log.InfoContext(ctx, "waiting tree stored with the task", "task_id", string(reqCtx.TaskID), "subagents", len(w.Nodes)-ended, "ended", ended, "bytes", len(b))
	}
	changed := wrun.WaitingChanged()
	keep(true)
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-quit:
				return
			case <-changed:
			}
			changed = wrun.WaitingChanged()
			keep(false)
		}
	}()
	return func() {
		close(quit)
		<-exited
		if last != nil {
			x.forgetWaiting(ctx, reqCtx, wr)
		}
	}
}

func (x *Executor) forgetWaiting(ctx context.Context, reqCtx *a2asrv.RequestContext, wr tasks.WaitRecorder) {
	if err := wr.RecordWaiting(ctx, nil); err != nil {
		x.cfg.Log.WarnContext(ctx, "waiting record not forgotten", "task_id", string(reqCtx.TaskID), "err", err)
	}
}

var _ tasks.WaitResumer = (*Executor)(nil)

// ResumeWaiting resumes a task recovered while its question waited
// (tasks.WaitResumer): it waits for the answer within what is left of the
// input timeout (counted from the input-required status's time), takes a
// run slot, and runs the task from its stored tree with the answer, then
// its follow-ups, as Execute would. A record or request that cannot be used
// ends the task failed, cause resume_failed.
func (x *Executor) ResumeWaiting(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, payload, rec []byte) error {
	wr, _ := q.(tasks.WaitRecorder)
	forget := func() {
		if wr != nil {
			x.forgetWaiting(ctx, reqCtx, wr)
		}
	}
	w, err := api.DecodeWaitingTree(rec)
	var req delegate.Request
	switch {
	case err != nil:
	case payload == nil:
		err = errors.New("no request was kept with the task")
	default:
		if jerr := json.Unmarshal(payload, &req); jerr != nil {
			err = fmt.Errorf("the kept request does not decode: %w", jerr)
		}
	}
	if err == nil && w.Nodes[0].Handle != string(reqCtx.TaskID) {
		err = fmt.Errorf("%w: its root %q is not the task's", api.ErrBadWaitingTree, w.Nodes[0].Handle)
	}
	answers, ok := q.(tasks.Answers)
	if err == nil && !ok {
		err = errors.New("the task's queue takes no answers")
	}
	if err != nil {
		forget()
		x.cfg.Log.ErrorContext(ctx, "waiting task cannot resume: failing it", "task_id", string(reqCtx.TaskID), "err", err)
		return x.refuseCause(ctx, reqCtx, q, api.StatusCrashed, api.CauseResumeFailed, "the task's stored waiting tree cannot be resumed: "+err.Error())
	}
	actx := ctx
	if x.cfg.InputTimeout > 0 {
		asked := time.Now()
		if st := reqCtx.StoredTask; st != nil && st.Status.Timestamp != nil {
			asked = *st.Status.Timestamp
		}
		var stop context.CancelFunc
		actx, stop = context.WithDeadlineCause(ctx, asked.Add(x.cfg.InputTimeout), errInputTimeout)
		defer stop()
	}
	m, err := answers.AwaitAnswer(actx)
	if err != nil {
		forget()
		if errors.Is(context.Cause(actx), errInputTimeout) && ctx.Err() == nil {
			x.cfg.Log.WarnContext(ctx, "no answer within the input timeout", "task_id", string(reqCtx.TaskID), "timeout", x.cfg.InputTimeout)
			x.cancelRemoteWaits(ctx, w)
			return q.Write(ctx, FinalStatus(reqCtx, api.SubagentResult{Status: api.StatusDeadline, Cause: api.CauseInputTimeout,
				Detail: fmt.Sprintf("no answer to the task's question within the input timeout (%s)", x.cfg.InputTimeout)}))
		}
		if cause := context.Cause(ctx); tasks.CancelRequested(cause) {
			// Not when the service stops: the task waits on, stored.
			x.cancelRemoteWaits(ctx, w)
			return q.Write(context.WithoutCancel(ctx), FinalStatus(reqCtx, api.SubagentResult{Status: api.StatusCancelled,
				Detail: "cancelled while its question waited: " + cause.Error()}))
		}
		return nil // ended: the engine ends it
	}
	forget()
	if ra, ok := q.(tasks.RunAdmitter); ok {
		release, err := ra.AdmitRun(ctx)
		if err != nil {
			return x.refuse(ctx, reqCtx, q, api.StatusCancelled, "the resumed run was not admitted: "+err.Error())
		}
		defer release()
	}
	req.Handle, req.Resume, req.Answer = string(reqCtx.TaskID), w, messageText(m)
	x.cfg.Log.InfoContext(ctx, "waiting task answered: resuming its stored tree", "task_id", string(reqCtx.TaskID), "subagents", len(w.Nodes))
	ctx, span := startDelegateSpan(ctx, reqCtx.TaskID, req.Payload.Telemetry.Traceparent)
	defer span.End()
	return x.execute(ctx, reqCtx, q, &req, true)
}

// cancelRemoteWaits cancels the peer's task each remote child of w waits
// on, for a task that ends without its answer: a delegation resumed with no
// answer sends none and cancels the peer's task (delegate.Request.ResumeRemote),
// as the live one would have.
func (x *Executor) cancelRemoteWaits(ctx context.Context, w *api.WaitingTree) {
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Remote == nil || x.cfg.Router == nil {
			continue
		}
		rw := *n.Remote
		run, err := x.cfg.Router.Start(context.WithoutCancel(ctx), delegate.Request{Handle: n.Handle, Payload: n.Payload, Provider: rw.Peer, ResumeRemote: &rw})
		if err != nil {
			x.cfg.Log.WarnContext(ctx, "the peer's task a remote child waited on not cancelled", "task_id", n.Handle, "remote_task_id", rw.TaskID, "err", err)
			continue
		}
		<-run.Done() // bounded by the peer's timeout
	}
}

// refuseCause is refuse with a cause in the status's metadata.
func (x *Executor) refuseCause(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, status api.TerminalStatus, cause, text string) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, StateOf(status), a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: text}))
	ev.Final = true
	ev.Metadata = map[string]any{api.MetaStatus: string(status), api.MetaCause: cause}
	return q.Write(ctx, ev)
}
