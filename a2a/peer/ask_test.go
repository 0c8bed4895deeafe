package peer

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/api"
)

// questioner is a plain A2A agent that stops at state (input-required or
// auth-required) with text (none when empty) and choices in its metadata,
// and completes with "answered: TEXT" on the message naming the task.
type questioner struct {
	a2atest.Executor
	state   a2a.TaskState
	text    string
	choices []any

	mu      sync.Mutex
	answers []*a2a.Message
}

func (e *questioner) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if st := reqCtx.StoredTask; st != nil && (st.Status.State == a2a.TaskStateInputRequired || st.Status.State == a2a.TaskStateAuthRequired) {
		e.mu.Lock()
		e.answers = append(e.answers, reqCtx.Message)
		e.mu.Unlock()
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		if err := q.Write(ctx, a2a.NewArtifactEvent(reqCtx, a2a.TextPart{Text: "answered: " + reqCtx.Message.Parts[0].(a2a.TextPart).Text})); err != nil {
			return err
		}
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}
	if err := q.Write(ctx, a2a.NewSubmittedTask(reqCtx, reqCtx.Message)); err != nil {
		return err
	}
	var msg *a2a.Message
	if e.text != "" {
		msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: e.text})
		if e.choices != nil {
			msg.Metadata = map[string]any{api.MetaAskChoices: e.choices}
		}
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, e.state, msg)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (e *questioner) answered() []*a2a.Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*a2a.Message(nil), e.answers...)
}

// A peer that stops to ask is asked through the request's Ask: its question
// (the status message's text, its choices, the asker's path the
// delegation's, Auth for auth-required) goes there, and the answer goes to
// the peer's task as a message naming it (taskId, contextId) with a
// messageId derived from the delegation (AnswerID), not random; the run then
// follows the task to its end. By stream and by polling.
func TestPeerQuestionIsAskedAndAnswered(t *testing.T) {
	for _, state := range []a2a.TaskState{a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired} {
		for _, streaming := range []bool{true, false} {
			exec := &questioner{state: state, text: "which repository?", choices: []any{"a", "b"}}
			url := a2atest.Serve(t, a2asrv.NewHandler(exec), func(url string) *a2a.AgentCard {
				c := a2atest.Card(url)
				c.Capabilities.Streaming = streaming
				return c
			}, nil)
			req := peerRequest("fix the bug", time.Hour)
			req.Payload.AgentPath = "0.3"
			var mu sync.Mutex
			var asked []api.Question
			req.Ask = func(ctx context.Context, q api.Question) (string, error) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, q)
				return "acme/agentd", nil
			}
			run, err := newPeer(t, url, nil).Start(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			res := runResult(t, run)
			if res.Status != api.StatusCompleted || res.Distillate.Text() != "answered: acme/agentd" {
				t.Fatalf("%s, streaming %v: result %+v", state, streaming, res)
			}
			mu.Lock()
			if len(asked) != 1 || asked[0].Text != "which repository?" || strings.Join(asked[0].Choices, ",") != "a,b" ||
				asked[0].AgentPath != "0.3" || asked[0].Auth != (state == a2a.TaskStateAuthRequired) {
				t.Fatalf("%s, streaming %v: asked %+v", state, streaming, asked)
			}
			mu.Unlock()
			ans := exec.answered()
			if len(ans) != 1 || ans[0].TaskID == "" || ans[0].ContextID == "" || ans[0].Role != a2a.MessageRoleUser {
				t.Fatalf("%s, streaming %v: the peer got %+v", state, streaming, ans)
			}
			if remote := run.(*remoteRun).remote(); ans[0].TaskID != remote {
				t.Fatalf("the answer names task %s, the delegation's is %s", ans[0].TaskID, remote)
			}
			if len(ans[0].ID) != 36 || ans[0].ID[14] != '8' {
				t.Fatalf("the answer's messageId %q is not a derived (version 8) UUID", ans[0].ID)
			}
		}
	}
}

// AnswerID is derived: the same delegation, task, question number and
// question give the same id (a resend is the same message); any other, not.
func TestAnswerIDIsDerived(t *testing.T) {
	a := AnswerID("h1", "t1", 1, "input-required|m1")
	if a != AnswerID("h1", "t1", 1, "input-required|m1") {
		t.Fatal("AnswerID is not deterministic")
	}
	for _, other := range []string{
		AnswerID("h2", "t1", 1, "input-required|m1"), AnswerID("h1", "t2", 1, "input-required|m1"),
		AnswerID("h1", "t1", 2, "input-required|m1"), AnswerID("h1", "t1", 1, "input-required|m2"),
	} {
		if other == a {
			t.Fatalf("two answers share the id %s", a)
		}
	}
}

// A question nobody answers (Ask fails) ends the run refused, saying what
// the peer asked and why it got no answer, and the peer's task is
// cancelled; a question with no text reaches Ask as a question naming the
// peer and its task.
func TestPeerQuestionUnanswered(t *testing.T) {
	exec := &questioner{state: a2a.TaskStateInputRequired}
	canceled := exec.Canceled()
	url := a2atest.Serve(t, a2asrv.NewHandler(exec), a2atest.Card, nil)
	req := peerRequest("fix the bug", time.Hour)
	var got api.Question
	req.Ask = func(ctx context.Context, q api.Question) (string, error) {
		got = q
		return "", errors.New("nobody takes questions")
	}
	run, err := newPeer(t, url, nil).Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, run)
	if !strings.HasPrefix(got.Text, "Peer b asks for input to go on (its task ") || got.AgentPath != "0" {
		t.Fatalf("the question of a peer that sent no text: %+v", got)
	}
	if res.Status != api.StatusRefused || !strings.Contains(res.Detail, "got no answer: nobody takes questions") {
		t.Fatalf("result %+v", res)
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting remote task was never cancelled")
	}
}

// A routed message's run (Request.Asks) hands the peer's question to its
// requester on Questions; the requester's answer goes to the peer. A cancel
// while the question waits cancels the peer's task.
func TestPeerQuestionToTheRequester(t *testing.T) {
	exec := &questioner{state: a2a.TaskStateInputRequired, text: "which branch?"}
	url := a2atest.Serve(t, a2asrv.NewHandler(exec), a2atest.Card, nil)
	p := newPeer(t, url, nil)
	req := peerRequest("fix the bug", time.Hour)
	req.Asks = true
	run, err := p.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	qs := run.(*remoteRun).Questions()
	select {
	case q := <-qs:
		if q.Q.Text != "which branch?" || q.Q.Handle != "h1" || q.Q.AgentPath != "0" {
			t.Fatalf("question %+v", q.Q)
		}
		q.Answer("main")
	case <-time.After(5 * time.Second):
		t.Fatal("no question came")
	}
	if res := runResult(t, run); res.Status != api.StatusCompleted || res.Distillate.Text() != "answered: main" {
		t.Fatalf("result %+v", res)
	}

	exec2 := &questioner{state: a2a.TaskStateInputRequired, text: "which branch?"}
	canceled := exec2.Canceled()
	url2 := a2atest.Serve(t, a2asrv.NewHandler(exec2), a2atest.Card, nil)
	run, err = newPeer(t, url2, nil).Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.(*remoteRun).Questions():
	case <-time.After(5 * time.Second):
		t.Fatal("no question came")
	}
	run.Cancel("tasks/cancel")
	if res := runResult(t, run); res.Status != api.StatusCancelled {
		t.Fatalf("cancelled while asking: %+v", res)
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the peer's task was not cancelled")
	}
}

// A question answered is not asked again when the task is read with it
// still there (a peer that answers the answer's send before it takes it);
// the next question (another status message) is.
func TestAnsweredQuestionNotAskedAgain(t *testing.T) {
	task := func(msgID string) *a2a.Task {
		m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "which repository?"})
		m.ID = msgID
		return &a2a.Task{ID: "t1", Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired, Message: m}}
	}
	r := &remoteRun{}
	r.setTask(task("m1"))
	if !r.stopped() {
		t.Fatal("a question not answered yet does not stop the following")
	}
	r.answered = questionKey(task("m1"))
	if r.stopped() {
		t.Fatal("the question answered stops the following again")
	}
	r.setTask(task("m2"))
	if !r.stopped() {
		t.Fatal("the next question does not stop the following")
	}
	r.setTask(&a2a.Task{ID: "t1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}})
	if !r.stopped() {
		t.Fatal("the end does not stop the following")
	}
}

// A delegation waiting on its peer's question says which (WaitingOn); the
// record survives JSON, as a stored waiting tree keeps it. Detached, the run
// ends without cancelling the peer's task; another provider (another
// process) resumed from the record sends no new delegation but the answer
// to that task, the messageId the live run would have sent, and follows the
// task to its end.
func TestPeerDelegationDetachedAndResumed(t *testing.T) {
	exec := &questioner{state: a2a.TaskStateInputRequired, text: "which repository?"}
	canceled := exec.Canceled()
	url := a2atest.Serve(t, a2asrv.NewHandler(exec), a2atest.Card, nil)
	req := peerRequest("fix the bug", time.Hour)
	asking := make(chan struct{})
	req.Ask = func(ctx context.Context, q api.Question) (string, error) {
		close(asking)
		<-ctx.Done()
		return "", context.Cause(ctx)
	}
	run, err := newPeer(t, url, nil).Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-asking:
	case <-time.After(10 * time.Second):
		t.Fatal("the peer's question was never asked")
	}
	rr := run.(*remoteRun)
	w, ok := rr.WaitingOn()
	if !ok || w.Peer != "peer:b" || w.TaskID != string(rr.remote()) || w.ContextID == "" || w.Number != 1 || w.Key == "" {
		t.Fatalf("WaitingOn = %+v, %v", w, ok)
	}
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var stored api.WaitingRemote
	if err := json.Unmarshal(b, &stored); err != nil || stored != w {
		t.Fatalf("the record's round trip: %+v, %v, want %+v", stored, err, w)
	}
	rr.Detach()
	if res := runResult(t, run); res.Status != api.StatusCancelled {
		t.Fatalf("the detached run: %+v", res)
	}
	select {
	case <-canceled:
		t.Fatal("detaching cancelled the peer's task")
	default:
	}

	p2 := newPeer(t, url, nil)
	req2 := peerRequest("fix the bug", time.Hour)
	req2.ResumeRemote, req2.Answer = &stored, "acme/agentd"
	run2, err := p2.Start(context.Background(), req2)
	if err != nil {
		t.Fatal(err)
	}
	if res := runResult(t, run2); res.Status != api.StatusCompleted || res.Distillate.Text() != "answered: acme/agentd" {
		t.Fatalf("the resumed run: %+v", res)
	}
	if n := p2.Started(); n != 0 {
		t.Fatalf("the resumed run sent %d delegations, want none", n)
	}
	ans := exec.answered()
	if len(ans) != 1 || string(ans[0].TaskID) != w.TaskID || ans[0].ContextID != w.ContextID ||
		ans[0].ID != AnswerID("h1", a2a.TaskID(w.TaskID), 1, w.Key) {
		t.Fatalf("the peer got %+v, want the answer to %s with messageId %s", ans, w.TaskID, AnswerID("h1", a2a.TaskID(w.TaskID), 1, w.Key))
	}

	other := stored
	other.Peer = "peer:c"
	req2.ResumeRemote = &other
	if _, err := p2.Start(context.Background(), req2); err == nil {
		t.Fatal("a delegation to another peer resumed here")
	}
}

// refuseFirstAnswer is a peer's handler that refuses the first message
// naming a task with an internal error before it reaches the agent, as
// a2a-go's server does while the execution that asked is still ending.
type refuseFirstAnswer struct {
	a2asrv.RequestHandler
	refused atomic.Int32
}

func (h *refuseFirstAnswer) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	if p.Message.TaskID != "" && h.refused.CompareAndSwap(0, 1) {
		return nil, a2a.ErrInternalError
	}
	return h.RequestHandler.OnSendMessage(ctx, p)
}

// An answer the peer refuses with an internal error while its task still
// asks (and holds no message of the answer's id) is sent again: the run
// completes with the one answer taken.
func TestAnswerSentAgainWhileThePeerStillAsks(t *testing.T) {
	exec := &questioner{state: a2a.TaskStateInputRequired, text: "which repository?"}
	h := &refuseFirstAnswer{RequestHandler: a2asrv.NewHandler(exec)}
	url := a2atest.Serve(t, h, a2atest.Card, nil)
	req := peerRequest("fix the bug", time.Hour)
	req.Ask = func(context.Context, api.Question) (string, error) { return "acme/agentd", nil }
	run, err := newPeer(t, url, nil).Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res := runResult(t, run); res.Status != api.StatusCompleted || res.Distillate.Text() != "answered: acme/agentd" {
		t.Fatalf("result %+v", res)
	}
	if h.refused.Load() != 1 || len(exec.answered()) != 1 {
		t.Fatalf("refused %d, answers taken %d: want 1 and 1", h.refused.Load(), len(exec.answered()))
	}
}
