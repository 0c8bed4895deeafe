package a2abind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

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
// caller q (auth-required for a peer's request for authentication,
// api.Question.Auth).
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
	state := a2a.TaskStateInputRequired
	if q.Auth {
		state = a2a.TaskStateAuthRequired
	}
	return a2a.NewStatusUpdateEvent(info, state, msg)
}

// A peer's task that stops to ask (input-required, or auth-required) asks
// through the delegation: QuestionFromTask reads its question, which goes up
// as a subagent's does, and AnswerMessage is the message that carries the
// answer back to the peer's task.

// QuestionFromTask reads the question of a peer's task that stopped to ask
// (input-required or auth-required; Auth set for the latter): the text of
// its status message (clipped to api.MaxQuestion; with no text, a question
// is made naming the peer and its task, so the one asked knows what waits);
// the choices its message metadata carries (api.MetaAskChoices: strings
// within api.MaxChoices and api.MaxChoice, else none); and the asker's agent
// path, under (the delegation's own path; "" is a root's, "0"), joined with
// the path an agentd peer names (api.MetaAskPath: its root is under itself,
// its "0.2" is under's child 2); an agentd peer's approval keeps its tool
// and arguments. The handle is left to the caller.
func QuestionFromTask(t *a2a.Task, peer string, agentd bool, under string) api.Question {
	if under == "" {
		under = "0"
	}
	q := api.Question{AgentPath: under, Auth: t.Status.State == a2a.TaskStateAuthRequired}
	var meta map[string]any
	if m := t.Status.Message; m != nil {
		q.Text = strings.TrimSpace(partsText(m.Parts))
		meta = m.Metadata
	}
	switch {
	case q.Text == "" && q.Auth:
		q.Text = fmt.Sprintf("Peer %s asks for authentication to go on (its task %s is auth-required, with no text saying how).", peer, t.ID)
	case q.Text == "":
		q.Text = fmt.Sprintf("Peer %s asks for input to go on (its task %s is input-required, with no question text).", peer, t.ID)
	case len(q.Text) > api.MaxQuestion:
		q.Text = clipTo(q.Text, api.MaxQuestion-len(clipped)) + clipped
	}
	q.Choices = choicesOf(meta[api.MetaAskChoices])
	if !agentd {
		return q
	}
	if p, ok := meta[api.MetaAskPath].(string); ok {
		q.AgentPath = joinPath(under, p)
	}
	if tool, ok := meta[api.MetaAskTool].(string); ok && tool != "" {
		if b, err := json.Marshal(meta[api.MetaAskArguments]); err == nil {
			q.Tool, q.Arguments = tool, b
		}
	}
	return q
}

// clipped marks a text cut to fit a bound.
const clipped = " [clipped]"

// clipTo cuts s to at most n bytes, on a rune boundary.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// choicesOf reads a question's choices from metadata: 1 to api.MaxChoices
// strings, each 1 to api.MaxChoice bytes; anything else is no choices.
func choicesOf(v any) []string {
	l, ok := v.([]any)
	if !ok || len(l) == 0 || len(l) > api.MaxChoices {
		return nil
	}
	out := make([]string, 0, len(l))
	for _, c := range l {
		s, ok := c.(string)
		if !ok || s == "" || len(s) > api.MaxChoice {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// joinPath puts a peer's agent path p under under: the peer's root ("0") is
// under itself, "0.X..." is under + ".X...". A path of another shape is
// under's.
func joinPath(under, p string) string {
	rest, ok := strings.CutPrefix(p, "0")
	if !ok || (rest != "" && rest[0] != '.') {
		return under
	}
	for _, seg := range strings.Split(strings.TrimPrefix(rest, "."), ".") {
		if rest != "" && (seg == "" || strings.Trim(seg, "0123456789") != "") {
			return under
		}
	}
	return under + rest
}

// AnswerMessage is the message that answers the question of the peer's task
// t: the answer as its one text part, naming t's id and contextId.
func AnswerMessage(t *a2a.Task, messageID, answer string) *a2a.Message {
	return &a2a.Message{ID: messageID, Role: a2a.MessageRoleUser, TaskID: t.ID, ContextID: t.ContextID,
		Parts: a2a.ContentParts{a2a.TextPart{Text: answer}}}
}

// ask shows the task's caller a root question and waits for the answer,
// the asker's giving up, the run's end (settled) or ctx's. errAskTimedOut
// says it cancelled the run at the input timeout; another error is a task
// event refused: the caller cancels the run.
func (x *Executor) ask(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, answers tasks.Answers, qq *supervisor.Question, settled <-chan struct{}, run delegate.Run) error {
	if forget := x.recordWaiting(ctx, reqCtx, q, run); forget != nil {
		defer forget()
	}
	ev := QuestionStatus(reqCtx, qq.Q)
	if err := q.Write(ctx, ev); err != nil {
		qq.Answer("") // nothing waits for the caller: the asker goes on
		return err
	}
	x.cfg.Log.InfoContext(ctx, "task "+string(ev.Status.State), "task_id", string(reqCtx.TaskID), "asker_path", qq.Q.AgentPath)
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
	return q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking,
		a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: fmt.Sprintf("question withdrawn: %v", cause)})))
}

// messageText joins a message's text parts.
func messageText(m *a2a.Message) string { return followUpObjective([]*a2a.Message{m}) }
