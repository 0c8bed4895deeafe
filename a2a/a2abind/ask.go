package a2abind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/delegate"
)

// A question a subagent asks that reaches the root (subagent.ask, passed
// up) goes to the task's caller: the task goes input-required, its status
// message the question (text, and in its metadata api.MetaAskPath and
// api.MetaAskChoices); the caller's next message naming the task is the
// answer (the engine puts the task back to working as it takes it), and
// the asker's subagent.ask returns it. A question its asker stops waiting
// for (it ended, its deadline passed) is withdrawn: the task goes back to
// working. Past ExecutorConfig.InputTimeout without an answer the run is
// cancelled and the task fails, cause input_timeout.

// errInputTimeout is the cause a run is cancelled with when its question
// waited past the input timeout.
var errInputTimeout = errors.New("a2abind: no answer to the task's question within the input timeout")

// errAskTimedOut is ask's answer when it cancelled the run at the input
// timeout: the turn's result is then deadline, cause input_timeout.
var errAskTimedOut = errors.New("a2abind: input timeout")

// QuestionStatus is the input-required status event that asks the task's
// caller q.
func QuestionStatus(info a2a.TaskInfoProvider, q api.Question) *a2a.TaskStatusUpdateEvent {
	msg := a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.TextPart{Text: q.Text})
	msg.Metadata = map[string]any{api.MetaAskPath: q.AgentPath}
	if len(q.Choices) > 0 {
		choices := make([]any, len(q.Choices))
		for i, c := range q.Choices {
			choices[i] = c
		}
		msg.Metadata[api.MetaAskChoices] = choices
	}
	if q.Tool != "" {
		var args any
		if json.Unmarshal(q.Arguments, &args) != nil {
			args = string(q.Arguments)
		}
		msg.Metadata[api.MetaAskTool], msg.Metadata[api.MetaAskArguments] = q.Tool, args
	}
	return a2a.NewStatusUpdateEvent(info, a2a.TaskStateInputRequired, msg)
}

// ask shows the task's caller a root question and waits for the answer,
// the asker's giving up, the run's end (settled) or ctx's. errAskTimedOut
// says it cancelled the run at the input timeout; another error is a task
// event refused: the caller cancels the run.
func (x *Executor) ask(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, answers tasks.Answers, qq *supervisor.Question, settled <-chan struct{}, run delegate.Run) error {
	if forget := x.recordWaiting(ctx, reqCtx, q, run); forget != nil {
		defer forget()
	}
	if err := q.Write(ctx, QuestionStatus(reqCtx, qq.Q)); err != nil {
		qq.Answer("") // nothing waits for the caller: the asker goes on
		return err
	}
	x.cfg.Log.InfoContext(ctx, "task input-required", "task_id", string(reqCtx.TaskID), "asker_path", qq.Q.AgentPath)
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-qq.Done():
			cancel(errors.New("the asker stopped waiting"))
		case <-settled:
			cancel(errors.New("the run ended"))
		case <-actx.Done():
		}
	}()
	if x.cfg.InputTimeout > 0 {
		var stop context.CancelFunc
		actx, stop = context.WithTimeoutCause(actx, x.cfg.InputTimeout, errInputTimeout)
		defer stop()
	}
	m, err := answers.AwaitAnswer(actx)
	if err == nil {
		if !qq.Answer(messageText(m)) {
			x.cfg.Log.WarnContext(ctx, "an answer came for a question no longer asked", "task_id", string(reqCtx.TaskID))
		}
		return nil
	}
	cause := context.Cause(actx)
	switch {
	case ctx.Err() != nil:
		return nil // tasks/cancel: the turn's wait cancels the run
	case errors.Is(cause, errInputTimeout):
		x.cfg.Log.WarnContext(ctx, "no answer within the input timeout: cancelling the run", "task_id", string(reqCtx.TaskID), "timeout", x.cfg.InputTimeout)
		run.Cancel(errInputTimeout.Error())
		return errAskTimedOut
	}
	// Withdrawn (the asker stopped waiting, or the run ended): the task
	// works again, unless it is already over.
	select {
	case <-settled:
		return nil
	default:
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking,
		a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: fmt.Sprintf("question withdrawn: %v", cause)}))
	return q.Write(ctx, ev)
}

// messageText joins a message's text parts.
func messageText(m *a2a.Message) string { return followUpObjective([]*a2a.Message{m}) }
