package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// Asking (subagent.ask, subagent.answer): a subagent's question stops its
// loop inside the tool call until an answer comes, which is the call's
// result. The question goes to its parent: the parent's model sees it in the
// child's report (state asking, from subagent.await, which returns as soon as
// the child asks, subagent.status and a sync subagent.spawn, which returns
// then too) and answers it with subagent.answer, or passes it up by asking
// its own parent (subagent.ask with the child's handle). A root's question
// goes to whoever started the tree (Run.Questions: the A2A task goes
// input-required). The asking subagent's process stays while it waits.

// ErrNotAsking refuses an answer for a subagent that has no question waiting.
var ErrNotAsking = errors.New("supervisor: no question is waiting")

// Question is one question waiting for its answer. It is safe for concurrent
// use.
type Question struct {
	Q     api.Question
	reply chan string // cap 1: the first answer
	once  sync.Once
	// done is closed once the question is answered or its asker stopped
	// waiting.
	done chan struct{}
}

func newQuestion(q api.Question) *Question {
	return &Question{Q: q, reply: make(chan string, 1), done: make(chan struct{})}
}

// NewQuestion returns q waiting for its answer, for an asker outside the
// supervisor: a remote run handing its peer's question to whoever started it
// (delegate.AskingRun), which answers it (Answer) while the asker waits
// (Wait).
func NewQuestion(q api.Question) *Question { return newQuestion(q) }

// Wait waits for q's answer or ctx's end (its cause the error); the question
// is no longer waiting once it returns.
func (q *Question) Wait(ctx context.Context) (string, error) {
	defer q.abandon()
	select {
	case a := <-q.reply:
		return a, nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// Answer gives the question its answer. It reports false when the question
// was answered already or its asker stopped waiting.
func (q *Question) Answer(text string) bool {
	ok := false
	q.once.Do(func() {
		q.reply <- text
		close(q.done)
		ok = true
	})
	return ok
}

// Done is closed once the question is answered, or its asker stopped waiting
// (it ended, or its deadline passed).
func (q *Question) Done() <-chan struct{} { return q.done }

// abandon ends the question without an answer.
func (q *Question) abandon() { q.once.Do(func() { close(q.done) }) }

// askState is a node's question, if it waits on one. Guarded by node.mu.
type askState struct {
	q    *Question
	wake chan struct{} // closed when the node next asks; nil until someone waits for it

	// The deadline moves by the time questions waited (unless
	// Config.AskChargesDeadline): waited so far, since when the wait in
	// progress (zero: none), and moved, told (cap 1) when a wait ends.
	waited time.Duration
	since  time.Time
	moved  chan struct{}
}

// deadlineNow is n's deadline moved by its questions' waits so far (the
// one in progress included).
func (n *node) deadlineNow() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.deadline.Add(n.ask.waited)
	if !n.ask.since.IsZero() {
		d = d.Add(time.Since(n.ask.since))
	}
	return d
}

// waitsUncharged reports whether a question's wait that does not count
// against the deadline is in progress.
func (n *node) waitsUncharged() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.ask.since.IsZero()
}

// Questions returns the channel a root's questions arrive on, one at a
// time: the asker waits until the question is taken, then until it is
// answered. Whoever started the tree takes them, shows each to its own
// caller and answers it (Question.Answer). Only a tree whose starter asked
// for it (StartRequest.Questions) has questions; the channel is nil
// otherwise.
func (r *Run) Questions() <-chan *Question { return r.n.nest.tree.questions }

// closedChan is closed: a wait on it ends at once.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// open reports whether q still waits for its answer.
func (q *Question) open() bool {
	select {
	case <-q.done:
		return false
	default:
		return true
	}
}

// asking returns n's question, or nil, and a channel closed when n asks
// (closed already when it asks now).
func (n *node) asking() (*Question, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ask.q != nil && n.ask.q.open() {
		return n.ask.q, closedChan
	}
	if n.ask.wake == nil {
		n.ask.wake = make(chan struct{})
	}
	return nil, n.ask.wake
}

// pose asks q for n and waits for the answer, ctx's end or n's end.
func (s *Supervisor) pose(ctx context.Context, n *node, q api.Question) (string, error) {
	qq := newQuestion(q)
	n.mu.Lock()
	if n.ask.q != nil && n.ask.q.open() {
		n.mu.Unlock()
		return "", errors.New("a question of this subagent is already waiting")
	}
	n.ask.q = qq
	uncharged := !s.cfg.AskChargesDeadline && n.ask.since.IsZero()
	if uncharged {
		n.ask.since = time.Now()
	}
	if n.ask.wake != nil {
		close(n.ask.wake)
		n.ask.wake = nil
	}
	n.mu.Unlock()
	n.nest.tree.change() // the tree may now be a waiting tree (suspend.go)
	defer func() {
		qq.abandon()
		n.mu.Lock()
		if n.ask.q == qq {
			n.ask.q = nil
		}
		if uncharged {
			n.ask.waited += time.Since(n.ask.since)
			n.ask.since = time.Time{}
		}
		n.mu.Unlock()
		if uncharged {
			select {
			case n.ask.moved <- struct{}{}:
			default:
			}
		}
	}()
	log := s.nodeLogger(n)
	log.Info("subagent asks", "asker_path", q.AgentPath, "choices", len(q.Choices))
	if s.cfg.Observer != nil {
		s.cfg.Observer.NodeProgress(n.info())
	}
	if n.parent == nil {
		t := n.nest.tree
		if t.questions == nil {
			return "", errors.New("no one above this subagent takes questions (the tree was started without a question channel)")
		}
		select {
		case t.questions <- qq:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
		if s.cfg.InputHold > 0 {
			defer s.holdTimer(t, qq)() // suspend.go
		}
	}
	select {
	case a := <-qq.reply:
		log.Info("question answered", "asker_path", q.AgentPath)
		return a, nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// toolAsk serves subagent.ask: it asks the caller's parent (or the tree's
// starter, for a root) and answers with the answer. With a handle it passes
// up the question of that child, and gives the child the answer too.
func (s *Supervisor) toolAsk(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	var a api.AskArgs
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil {
		return api.TextResult(api.ToolAsk+": bad arguments: want {\"question\": \"...\", \"choices\": [...]} or {\"handle\": \"...\"}", true)
	}
	if err := a.Validate(); err != nil {
		return api.TextResult(api.ToolAsk+": "+err.Error(), true)
	}
	if a.Handle == "" {
		q := api.Question{Text: a.Question, Choices: a.Choices, AgentPath: caller.payload.AgentPath, Handle: caller.handle}
		ans, err := s.pose(ctx, caller, q)
		if err != nil {
			return api.TextResult(api.ToolAsk+": no answer: "+err.Error(), true)
		}
		return api.TextResult(ans, false)
	}
	c, ok := descendant(caller, a.Handle)
	if !ok {
		return api.TextResult(fmt.Sprintf("%s: no subagent with handle %q below this one", api.ToolAsk, a.Handle), true)
	}
	cq, _ := c.asking()
	if cq == nil {
		return api.TextResult(fmt.Sprintf("%s: subagent %s has no question waiting", api.ToolAsk, a.Handle), true)
	}
	ans, err := s.pose(ctx, caller, cq.Q)
	if err != nil {
		return api.TextResult(api.ToolAsk+": no answer: "+err.Error(), true)
	}
	if !cq.Answer(ans) {
		return api.TextResult(fmt.Sprintf("%s: the answer came, but subagent %s no longer waits for it; the answer was: %s", api.ToolAsk, a.Handle, ans), true)
	}
	return api.TextResult(ans, false)
}

// toolAnswer serves subagent.answer: the answer to a child's question.
func (s *Supervisor) toolAnswer(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	var a api.AnswerArgs
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil || a.Handle == "" {
		return api.TextResult(api.ToolAnswer+": bad arguments: want {\"handle\": \"...\", \"answer\": \"...\"}", true)
	}
	if len(a.Answer) > api.MaxAnswer {
		return api.TextResult(fmt.Sprintf("%s: the answer is %d bytes, over the limit of %d", api.ToolAnswer, len(a.Answer), api.MaxAnswer), true)
	}
	c, ok := descendant(caller, a.Handle)
	if !ok {
		return api.TextResult(fmt.Sprintf("%s: no subagent with handle %q below this one", api.ToolAnswer, a.Handle), true)
	}
	if q, _ := c.asking(); q != nil && q.Q.Auth {
		return api.TextResult(fmt.Sprintf("%s: subagent %s waits for authentication a peer asks for (%s); only the task's caller can give it: pass it up with %s {\"handle\": %q}", api.ToolAnswer, a.Handle, q.Q.Text, api.ToolAsk, a.Handle), true)
	}
	if err := answerNode(c, a.Answer); err != nil {
		return api.TextResult(fmt.Sprintf("%s: subagent %s: %v", api.ToolAnswer, a.Handle, err), true)
	}
	s.nodeLogger(caller).Info("child's question answered", "child_path", c.payload.AgentPath)
	return api.TextResult("answered "+a.Handle, false)
}

// answerNode answers the question n waits on.
func answerNode(n *node, text string) error {
	q, _ := n.asking()
	if q == nil || !q.Answer(text) {
		return ErrNotAsking
	}
	return nil
}

// withQuestion adds c's waiting question to its report.
func withQuestion(r api.ChildReport, c *node) api.ChildReport {
	if r.State != api.ChildRunning {
		return r
	}
	if q, _ := c.asking(); q != nil {
		qq := q.Q
		r.State, r.Question = api.ChildAsking, &qq
	}
	return r
}

// remoteAskKey is the context key of a remote child's ask function.
type remoteAskKey struct{}

// withRemoteAsk returns ctx carrying fn, the function a remote child's
// questions go to.
func withRemoteAsk(ctx context.Context, fn func(context.Context, api.Question) (string, error)) context.Context {
	return context.WithValue(ctx, remoteAskKey{}, fn)
}

// RemoteAsk returns the function a Delegator hands the questions of the
// remote child it was asked to start (the ctx of Delegator.Delegate): its
// peer's task stopped to ask (input-required, or auth-required with
// api.Question.Auth). The question is the child's, as a local child's
// subagent.ask is (its handle set to the child's): its parent's model sees it
// in state asking and answers it or passes it up. The function returns the
// answer, or its ctx's cause. Nil when ctx carries none.
func RemoteAsk(ctx context.Context) func(ctx context.Context, q api.Question) (string, error) {
	fn, _ := ctx.Value(remoteAskKey{}).(func(context.Context, api.Question) (string, error))
	return fn
}
