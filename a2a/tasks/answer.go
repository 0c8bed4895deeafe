package tasks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
)

// A task that asks its caller a question is input-required (an interrupted
// state: a blocking send returns it, a stream shows it and goes on). The
// next message naming the task is the answer: it joins the history after
// the question, the task goes back to working in the same step, and the
// executor, waiting in Answers.AwaitAnswer, gets it. While the task is not
// input-required a message naming it is a follow-up (the next turn).

// Answers is implemented by the event queue the Engine hands an executor:
// after it writes an input-required status, AwaitAnswer returns the message
// that answers it (the task is working again by then), or ctx's cause.
type Answers interface {
	AwaitAnswer(ctx context.Context) (*a2a.Message, error)
}

// asking is a live task's question state, guarded by liveTask.mu.
type asking struct {
	// answers takes the answer; non-nil while the task is input-required.
	answers chan *a2a.Message
	// last is the answers of the latest question, kept once it is
	// answered, so an executor that waits after the answer came gets it.
	last chan *a2a.Message
	// interrupted: the task is in an interrupted state (input-required,
	// auth-required). Its turns into and out of one are counted by the
	// task's stall, which wakes a blocking send's wait (waitStop).
	interrupted bool
}

// interruptedState reports whether s ends a blocking wait without ending the
// task.
func interruptedState(s a2a.TaskState) bool {
	return s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// noteStateLocked follows the task into and out of an interrupted state.
func (lt *liveTask) noteStateLocked(s a2a.TaskState) {
	a := &lt.asking
	if interruptedState(s) {
		if a.answers == nil { // auth-required is answered alike: a peer's request the caller answers (a2a/peer)
			a.answers = make(chan *a2a.Message, 1)
			a.last = a.answers
		}
		if !a.interrupted {
			a.interrupted = true
			lt.stall.turn()
		}
		return
	}
	a.answers = nil
	if a.interrupted {
		a.interrupted = false
		lt.stall.turn()
	}
}

// answerLocked takes msg as the answer of the input-required task lt: it is
// checked (text, within api.MaxAnswer), joins the history after the
// question, the task goes working, and the executor gets it. lt.mu is held.
func (e *Engine) answerLocked(ctx context.Context, lt *liveTask, msg *a2a.Message, early *earlySub) (*liveTask, error) {
	cur := lt.task
	text := messageText(msg)
	switch {
	case strings.TrimSpace(text) == "":
		return nil, fmt.Errorf("task %s is %s: the answer has no text: %w", cur.ID, cur.Status.State, a2a.ErrInvalidParams)
	case len(text) > api.MaxAnswer:
		return nil, fmt.Errorf("task %s is %s: the answer is %d bytes, over the limit of %d: %w", cur.ID, cur.Status.State, len(text), api.MaxAnswer, a2a.ErrInvalidParams)
	}
	m := *msg
	m.ContextID = cur.ContextID
	ev := a2a.NewStatusUpdateEvent(cur, a2a.TaskStateWorking, nil)
	next, err := Apply(cur, ev) // the question joins the history
	if err != nil {
		return nil, err
	}
	next.History = append(slices.Clip(next.History), &m) // then the answer
	answers := lt.asking.answers
	if err := e.commitLocked(context.WithoutCancel(ctx), lt, ev, next); err != nil {
		return nil, err
	}
	answers <- &m // cap 1, and only this answer is taken: lt.asking.answers is nil now
	if early != nil && early.answerOnly {
		first, err := e.wholeTaskLocked(ctx, lt)
		if err != nil {
			return nil, err
		}
		early.first = first
	}
	return lt, nil
}

// messageText joins a message's text parts.
func messageText(m *a2a.Message) string {
	var texts []string
	for _, p := range m.Parts {
		if t, ok := p.(a2a.TextPart); ok {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// AwaitAnswer implements Answers.
func (q queue) AwaitAnswer(ctx context.Context) (*a2a.Message, error) {
	q.lt.mu.Lock()
	ch := q.lt.asking.last
	q.lt.mu.Unlock()
	if ch == nil {
		return nil, fmt.Errorf("tasks: task %s has asked no question", q.lt.snapshot().ID)
	}
	select {
	case m := <-ch:
		return m, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-q.lt.done:
		return nil, errTaskFinished
	}
}

var _ Answers = retainingQueue{}
