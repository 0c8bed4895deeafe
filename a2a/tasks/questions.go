package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// The operator's side of asking: the questions the live tasks wait on are
// the engine's own state (a liveTask whose asking.answers is set, its
// status message the question), listed by Questions; AnswerAs answers one
// on its caller's behalf by the path the caller's answer takes
// (answerLocked). A task registered as waiting by any other path (one
// restored after a restart) is listed and answered the same way.

// anonymous is how a question names the caller of a task nobody
// authenticated created (the development mode), as the audit trail does.
const anonymous = "anonymous"

// Questions returns the questions the tasks this engine runs wait on, the
// longest waiting first; with task set, that task's only (none when it
// does not wait). Handle and Deadline are left for the caller to fill: the
// engine knows neither the supervisor's handles nor the input timeout.
func (e *Engine) Questions(task a2a.TaskID) []api.PendingQuestion {
	e.mu.Lock()
	live := make([]*liveTask, 0, len(e.live))
	for id, lt := range e.live {
		if task == "" || id == task {
			live = append(live, lt)
		}
	}
	e.mu.Unlock()
	out := []api.PendingQuestion{}
	for _, lt := range live {
		lt.mu.Lock()
		waiting, t, owner := lt.asking.answers != nil, lt.task, lt.owner
		lt.mu.Unlock()
		if waiting && t.Status.State == a2a.TaskStateInputRequired {
			out = append(out, pendingQuestion(t, owner))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].TaskID < out[j].TaskID
	})
	return out
}

// pendingQuestion is the question of t, an input-required task created by
// owner: its status message (a2abind.QuestionStatus).
func pendingQuestion(t *a2a.Task, owner string) api.PendingQuestion {
	q := api.PendingQuestion{TaskID: string(t.ID), ContextID: t.ContextID, Caller: owner}
	if q.Caller == "" {
		q.Caller = anonymous
	}
	if t.Status.Timestamp != nil {
		q.Since = t.Status.Timestamp.UTC()
	}
	m := t.Status.Message
	if m == nil {
		return q
	}
	q.Text = messageText(m)
	q.AgentPath, _ = m.Metadata[api.MetaAskPath].(string)
	q.Tool, _ = m.Metadata[api.MetaAskTool].(string)
	switch cs := m.Metadata[api.MetaAskChoices].(type) {
	case []string:
		q.Choices = cs
	case []any:
		for _, c := range cs {
			if s, ok := c.(string); ok {
				q.Choices = append(q.Choices, s)
			}
		}
	}
	if args, ok := m.Metadata[api.MetaAskArguments]; ok && q.Tool != "" {
		if b, err := json.Marshal(args); err == nil {
			q.Arguments = b
		}
	}
	return q
}

// AnswerAs answers the question task id waits on with answer, on its
// caller's behalf, as the caller's own answer would (answerLocked): the
// question and the answer join the history, the answer's metadata naming
// by (api.MetaAnsweredBy), and the task goes back to working; the task
// after it is returned. It does not authorize: the server offers it to
// operators only. Refused, nothing changed: an unknown task
// (a2a.ErrTaskNotFound), one that does not wait for an answer, an answer
// with no text or over api.MaxAnswer (a2a.ErrInvalidParams); one that
// waits on another replica (a2a.ErrUnsupportedOperation, naming it).
func (e *Engine) AnswerAs(ctx context.Context, id a2a.TaskID, answer, by string) (*a2a.Task, error) {
	if id == "" {
		return nil, fmt.Errorf("answer: the task id is required: %w", a2a.ErrInvalidParams)
	}
	lt := e.getLive(id)
	if lt == nil {
		t, err := boundedRead(e, ctx, e.answerBy(), "read task "+string(id), func(ctx context.Context) (*a2a.Task, error) {
			t, _, err := e.store.Get(ctx, id)
			return t, err
		})
		switch {
		case errors.Is(err, a2a.ErrTaskNotFound):
			return nil, errNotFound(id)
		case err != nil:
			return nil, fmt.Errorf("read task %s: %w", id, err)
		}
		if sh, remote := e.sharedFor(t); remote && t.Status.State == a2a.TaskStateInputRequired {
			// Another replica runs it: the answer goes to that one as a
			// forwarded follow-up does, taken by its answer path there.
			fw, ok := sh.(Forwarder)
			if !ok || !e.runnerKnown(ctx, t) {
				return nil, e.elsewhere(ctx, t)
			}
			lt, err := e.forward(ctx, fw, t, answerMessage(t, answer, by), nil, nil)
			if err != nil {
				return nil, err
			}
			return lt.task, nil
		}
		return nil, notWaiting(t)
	}
	if err := e.lockBy(ctx, lt, e.answerBy()); err != nil {
		return nil, err
	}
	defer lt.mu.Unlock()
	if lt.asking.answers == nil || lt.task.Status.State != a2a.TaskStateInputRequired {
		return nil, notWaiting(lt.task)
	}
	if _, err := e.answerLocked(ctx, lt, answerMessage(lt.task, answer, by), nil); err != nil {
		return nil, err
	}
	return e.wholeTaskLocked(ctx, lt)
}

// notWaiting refuses an answer to t, which waits for none.
func notWaiting(t *a2a.Task) error {
	return fmt.Errorf("task %s is %s, not waiting for an answer: %w", t.ID, t.Status.State, a2a.ErrInvalidParams)
}

// answerMessage is an operator's answer to task t's question: a user
// message naming the task, the operator in its metadata.
func answerMessage(t *a2a.Task, answer, by string) *a2a.Message {
	msg := a2a.NewMessageForTask(a2a.MessageRoleUser, t, a2a.TextPart{Text: answer})
	msg.Metadata = map[string]any{api.MetaAnsweredBy: by}
	return msg
}

// maxElsewhere bounds how many questions QuestionsElsewhere lists.
const maxElsewhere = 500

// QuestionsElsewhere returns the questions of the tasks other processes
// sharing the store run (replicas on one PostgreSQL), read from the store:
// each input-required task not live here, its question from its status
// message (task set: that task's only; at most maxElsewhere, the longest
// waiting first). None with a store that is not Shared. An answer to one
// (AnswerAs) is forwarded to its runner.
func (e *Engine) QuestionsElsewhere(ctx context.Context, task a2a.TaskID) ([]api.PendingQuestion, error) {
	if _, ok := e.store.(Shared); !ok {
		return nil, nil
	}
	var out []api.PendingQuestion
	add := func(t *a2a.Task, owner string) {
		if t.Status.State == a2a.TaskStateInputRequired && e.getLive(t.ID) == nil {
			out = append(out, pendingQuestion(t, owner))
		}
	}
	if task != "" {
		t, owner, err := e.store.Get(ctx, task)
		switch {
		case errors.Is(err, a2a.ErrTaskNotFound):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("read task %s: %w", task, err)
		}
		add(t, owner)
		return out, nil
	}
	q := ListQuery{AnyOwner: true, State: a2a.TaskStateInputRequired, PageSize: MaxPageSize}
	for len(out) < maxElsewhere {
		page, err := e.store.List(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("list the tasks waiting for an answer: %w", err)
		}
		for _, t := range page.Tasks {
			if e.getLive(t.ID) != nil {
				continue
			}
			_, owner, err := e.store.Get(ctx, t.ID) // the list carries no owner
			if err != nil {
				continue // gone since the list: it waits no more
			}
			add(t, owner)
		}
		if page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].TaskID < out[j].TaskID
	})
	if len(out) > maxElsewhere {
		out = out[:maxElsewhere]
	}
	return out, nil
}
