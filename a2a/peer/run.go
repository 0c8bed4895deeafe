package peer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/delegate"
)

// errRunDeadline is the cause of a run's context when its deadline passes.
var errRunDeadline = errors.New("peer: delegation deadline passed")

// errDetached is the cause of a run's context after Detach: the follow
// ends, and the peer's task, waiting on its question, is left as it is.
var errDetached = errors.New("peer: delegation detached while its peer's question waits")

// runCancelled is the cause of a run's context after Cancel.
type runCancelled struct{ reason string }

func (c runCancelled) Error() string { return "cancelled: " + c.reason }

// remoteRun is one delegation to a peer.
type remoteRun struct {
	span     trace.Span // the delegation's client span; ends with the run
	p        *Provider
	held     *held // client's; released when the run ends
	client   a2acall.Transport
	iface    Interface // what client calls
	handle   string
	agentd   bool
	stream   bool
	onText   func(step int, text string) // the request's OnText; nil: not shown
	steps    int                         // the pieces of text that started it over; the run's goroutine only
	deadline time.Duration
	cancel   context.CancelCauseFunc
	done     chan struct{}

	// ask takes the peer's questions (a task stopped at input-required or
	// auth-required) and returns the answer; nil: nobody can be asked, and
	// such a task ends the delegation refused. questions carries them to
	// the requester for a routed message (AskingRun); nil otherwise.
	ask        func(ctx context.Context, q api.Question) (string, error)
	questions  chan *supervisor.Question
	under      string // the delegation's agent path, which a peer's asker's is joined under
	clock      *clock // the run's deadline, stopped while a question waits
	unanswered error  // why a question got no answer; the run's goroutine only

	mu       sync.Mutex // guards remoteID, task, answered, waiting
	remoteID a2a.TaskID
	task     *a2a.Task          // the remote task as last seen
	answered string             // questionKey of the question last answered
	waiting  *api.WaitingRemote // the peer's question r.ask waits on; nil when none
	result   api.SubagentResult
}

var _ delegate.AskingRun = (*remoteRun)(nil)

// Questions carries the peer's questions to the requester of a routed
// message (delegate.Request.Asks); nil otherwise (AskingRun).
func (r *remoteRun) Questions() <-chan *supervisor.Question { return r.questions }

// askRequester hands q to the requester (Questions) and waits for its answer.
func (r *remoteRun) askRequester(ctx context.Context, q api.Question) (string, error) {
	qq := supervisor.NewQuestion(q)
	select {
	case r.questions <- qq:
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
	return qq.Wait(ctx)
}

// clock is a deadline that stops while a question waits: the wait is not
// charged to the delegation (the supervisor's own deadline of a nested
// child keeps its policy, Config.AskChargesDeadline).
type clock struct {
	mu    sync.Mutex
	t     *time.Timer
	left  time.Duration // what was left when it last stopped
	since time.Time     // when it last started
}

func newClock(d time.Duration, expire func()) *clock {
	return &clock{t: time.AfterFunc(d, expire), left: d, since: time.Now()}
}

// pause stops the clock; a clock that expired already stays expired.
func (c *clock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.Stop() {
		c.left -= time.Since(c.since)
	}
}

// resume starts it again with what was left.
func (c *clock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.since = time.Now()
	c.t.Reset(max(c.left, 0))
}

func (c *clock) stop() { c.t.Stop() }

func (r *remoteRun) ID() string                 { return r.handle }
func (r *remoteRun) Done() <-chan struct{}      { return r.done }
func (r *remoteRun) Result() api.SubagentResult { <-r.done; return r.result }

// Cancel stops the delegation: tasks/cancel to the peer, status cancelled.
func (r *remoteRun) Cancel(reason string) { r.cancel(runCancelled{reason: reason}) }

// WaitingOn returns the peer's question the run waits on the answer of
// (supervisor.RemoteWaiter).
func (r *remoteRun) WaitingOn() (api.WaitingRemote, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting == nil {
		return api.WaitingRemote{}, false
	}
	return *r.waiting, true
}

// Detach ends the run's follow, leaving the peer's task as it is (no
// tasks/cancel): the supervisor suspends the child while the peer's
// question waits, and its answer resumes it (delegate.Request.ResumeRemote).
func (r *remoteRun) Detach() { r.cancel(errDetached) }

// loop runs body (the delegation's follow) and makes the run's result.
func (r *remoteRun) loop(ctx context.Context, body func(context.Context) error) {
	defer close(r.done)
	defer r.p.release(r.held, false)
	defer r.cancel(nil)
	defer func() { endPeerSpan(r.span, r.remote(), r.result) }()
	dctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	r.clock = newClock(r.deadline, func() { stop(errRunDeadline) })
	defer r.clock.stop()
	err := body(dctx)
	cause := context.Cause(dctx)
	switch {
	case errors.Is(cause, errDetached):
		r.result = r.partial(api.StatusCancelled, errDetached.Error())
	case dctx.Err() != nil:
		status, detail := api.StatusDeadline, fmt.Sprintf("the peer did not finish within %s", r.deadline)
		var rc runCancelled
		if errors.As(cause, &rc) {
			status, detail = api.StatusCancelled, rc.Error()
		}
		r.cancelRemote()
		r.result = r.partial(status, detail)
	case err != nil:
		r.p.log.Warn("delegation to peer failed", "task_id", r.handle, "err", err)
		r.result = r.partial(api.StatusCrashed, "peer "+r.p.cfg.Name+": "+err.Error())
		if refused(err) || !r.p.cardOffers(r.iface) {
			// The peer does not speak what it was called in (or was called,
			// pinned, in what its card does not offer, and failed): say
			// which, and what its card offers, beside its own words.
			r.result.Cause = api.CausePeerUnsupported
			r.result.Detail = fmt.Sprintf("peer %s refused A2A %s over %s (%s): %v", r.p.cfg.Name, r.iface.Version, r.iface.Binding, r.p.offers(), err)
		}
	default:
		r.mu.Lock()
		t := r.task
		r.mu.Unlock()
		r.result = a2abind.ResultFromTask(t, r.agentd)
		if !t.Status.State.Terminal() {
			// It waits for input or authentication nobody here will give.
			if r.unanswered != nil {
				r.result.Detail = fmt.Sprintf("peer %s asked %q and got no answer: %v", r.p.cfg.Name, r.result.Detail, r.unanswered)
			}
			r.cancelRemote()
		}
	}
}

// follow sends the message and follows the remote task until it ends. Each
// time it stops to ask (input-required, auth-required), the question goes to
// r.ask, and the answer to the peer's task, naming it; a question nobody
// here can answer (no r.ask, or no answer) ends the following (stopped).
func (r *remoteRun) follow(ctx context.Context, msg *a2a.Message) error {
	if err := r.send(ctx, msg); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return r.followFrom(ctx, 1)
}

// resumeFollow is the follow of a resumed delegation: the answer to the
// peer's question w, as the live follow would have sent it (its messageId
// derived alike: a resend is the same message), then the task followed on.
// An empty answer sends nothing: the task is cancelled, as live.
func (r *remoteRun) resumeFollow(ctx context.Context, w api.WaitingRemote, answer string) error {
	t := &a2a.Task{ID: a2a.TaskID(w.TaskID), ContextID: w.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired}}
	r.setTask(t)
	if strings.TrimSpace(answer) == "" {
		r.unanswered = errors.New("the answer has no text")
		return nil
	}
	r.mu.Lock()
	r.answered = w.Key
	r.mu.Unlock()
	r.p.log.Info("peer's question answered", "task_id", r.handle, "remote_task_id", w.TaskID, "resumed", true)
	if err := r.sendAnswer(ctx, t, a2abind.AnswerMessage(t, AnswerID(r.handle, t.ID, w.Number, w.Key), answer)); err != nil {
		return fmt.Errorf("send the answer: %w", err)
	}
	return r.followFrom(ctx, w.Number+1)
}

// followFrom follows the remote task from its question number n on.
func (r *remoteRun) followFrom(ctx context.Context, n int) error {
	for ; ; n++ {
		if err := r.watch(ctx); err != nil {
			return err
		}
		r.mu.Lock()
		t := r.task
		r.mu.Unlock()
		if t.Status.State.Terminal() || r.ask == nil {
			return nil
		}
		q := a2abind.QuestionFromTask(t, r.p.cfg.Name, r.agentd, r.under)
		if q.Handle == "" {
			q.Handle = r.handle
		}
		r.p.log.Info("peer asks", "task_id", r.handle, "remote_task_id", string(t.ID), "state", string(t.Status.State), "asker_path", q.AgentPath)
		key := questionKey(t)
		r.mu.Lock()
		r.waiting = &api.WaitingRemote{Peer: r.p.Name(), TaskID: string(t.ID), ContextID: t.ContextID, Number: n, Key: key}
		r.mu.Unlock()
		r.clock.pause()
		answer, err := r.ask(ctx, q)
		r.clock.resume()
		r.mu.Lock()
		r.waiting = nil
		r.mu.Unlock()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil && strings.TrimSpace(answer) == "":
			err = errors.New("the answer has no text")
		}
		if err != nil {
			r.unanswered = err
			return nil
		}
		r.mu.Lock()
		r.answered = key
		r.mu.Unlock()
		r.p.log.Info("peer's question answered", "task_id", r.handle, "remote_task_id", string(t.ID))
		if err := r.sendAnswer(ctx, t, a2abind.AnswerMessage(t, AnswerID(r.handle, t.ID, n, key), answer)); err != nil {
			return fmt.Errorf("send the answer: %w", err)
		}
	}
}

// send sends msg (the delegation, or an answer naming the remote task) and
// takes the task the peer answers with. The send is not cut by a cancel or
// the deadline: the remote task it creates must be known to be cancelled.
// It is bounded by the timeout.
func (r *remoteRun) send(ctx context.Context, msg *a2a.Message) error {
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.p.cfg.Timeout)
	res, err := r.client.SendMessage(sendCtx, &a2a.MessageSendParams{Message: msg})
	cancel()
	if err != nil {
		return err
	}
	switch v := res.(type) {
	case *a2a.Message:
		// A stateless answer: the whole outcome.
		id := a2a.TaskID(r.handle)
		if msg.TaskID != "" {
			id = msg.TaskID
		}
		r.setTask(&a2a.Task{ID: id, ContextID: v.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
			Artifacts: []*a2a.Artifact{{ID: "message", Parts: v.Parts}}})
	case *a2a.Task:
		r.setTask(v)
	}
	return nil
}

// answerRetries bounds the sends again of an answer (sendAnswer).
const answerRetries = 6

// sendAnswer sends msg, the answer to the question the peer's task t stops
// at. A peer may still be ending the execution that asked when its
// question is seen, and a2a-go's server refuses a message for a task whose
// execution has not ended with an internal error (-32603, its
// ErrExecutionInProgress), before it takes anything. So an answer refused
// with an internal error is sent again, after a wait that doubles from 10
// ms, up to answerRetries times, while the peer's task is still at that
// question and holds no message of the answer's id (it was not taken).
func (r *remoteRun) sendAnswer(ctx context.Context, t *a2a.Task, msg *a2a.Message) error {
	wait := 10 * time.Millisecond
	for i := 0; ; i++ {
		err := r.send(ctx, msg)
		if err == nil || !errors.Is(err, a2a.ErrInternalError) || i == answerRetries || !r.stillAsks(ctx, t.Status.State, msg.ID) {
			return err
		}
		r.p.log.Info("peer refused the answer while its task still asks: sending it again", "task_id", r.handle, "remote_task_id", string(t.ID), "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// stillAsks reports whether the peer's task is still at state (the question
// answered) and holds no message of id.
func (r *remoteRun) stillAsks(ctx context.Context, state a2a.TaskState, id string) bool {
	getCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.p.cfg.Timeout)
	defer cancel()
	task, err := r.client.GetTask(getCtx, &a2a.TaskQueryParams{ID: r.remote()})
	if err != nil || task.Status.State != state {
		return false
	}
	for _, m := range task.History {
		if m != nil && m.ID == id {
			return false
		}
	}
	return true
}

// watch follows the remote task, by its stream when the peer offers one,
// else (or once the stream breaks) by polling, until it ends or stops at a
// question not answered yet (stopped).
func (r *remoteRun) watch(ctx context.Context) error {
	if r.stopped() {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if r.stream {
		r.subscribe(ctx)
		if r.stopped() {
			// The stream carried the end or the question; the whole task
			// (every artifact, the final metadata, the question's) is read
			// once. Failing that, the stream's account stands.
			_ = r.refresh(ctx)
			if r.stopped() {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return r.poll(ctx)
}

// questionKey tells one question of a task from the next: its state and
// status message (id, else timestamp and text). After an answer the task
// may still be read with the question answered (a peer that answers the
// answer's send before it takes it); that one is not asked again.
func questionKey(t *a2a.Task) string {
	st := t.Status
	k := string(st.State)
	if m := st.Message; m != nil && m.ID != "" {
		return k + "|" + m.ID
	}
	if st.Timestamp != nil {
		k += "|" + st.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	if st.Message != nil {
		for _, p := range st.Message.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				k += "|" + tp.Text
			}
		}
	}
	return k
}

// subscribe follows the remote task's stream until it ends; any stream error
// leaves the rest to polling.
func (r *remoteRun) subscribe(ctx context.Context) {
	for ev, err := range r.client.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: r.remote()}) {
		if err != nil {
			return
		}
		r.text(ev)
		r.mu.Lock()
		if t, ok := ev.(*a2a.Task); ok {
			r.task = t
		} else if next, err := tasks.Apply(r.task, ev); err == nil {
			r.task = next
		}
		done := r.stoppedLocked()
		r.mu.Unlock()
		if done {
			return
		}
	}
}

// text hands the text of a streamed piece of the remote task's artifact to
// the request's OnText: an artifact update that appends, or that starts an
// artifact over without being its last chunk (a peer's growing distillate:
// agentd streams its model's text so). An update that is the whole artifact
// at once (not appended, the last chunk: the answer written when the task
// ends) is the result's, not shown twice, and an update an agentd peer marks
// as another task's (a grandchild's text, api.MetaStreamTask) is not this
// child's.
func (r *remoteRun) text(ev a2a.Event) {
	u, ok := ev.(*a2a.TaskArtifactUpdateEvent)
	if !ok || r.onText == nil || u.Artifact == nil || (u.LastChunk && !u.Append) || u.Metadata[api.MetaStreamTask] != nil {
		return
	}
	var b strings.Builder
	for _, p := range u.Artifact.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	if b.Len() == 0 {
		return
	}
	if !u.Append || r.steps == 0 {
		r.steps++
	}
	r.onText(r.steps, b.String())
}

// poll reads the remote task with backoff until it ends or stops.
func (r *remoteRun) poll(ctx context.Context) error {
	wait := 50 * time.Millisecond
	for {
		if err := r.refresh(ctx); err != nil && ctx.Err() == nil {
			r.p.log.Debug("tasks/get failed; retrying", "task_id", r.handle, "err", err)
		}
		if r.stopped() {
			return nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// refresh reads the whole remote task (artifacts and metadata included).
func (r *remoteRun) refresh(ctx context.Context) error {
	getCtx, cancel := context.WithTimeout(ctx, r.p.cfg.Timeout)
	defer cancel()
	t, err := r.client.GetTask(getCtx, &a2a.TaskQueryParams{ID: r.remote()})
	if err != nil {
		return fmt.Errorf("get the task: %w", err)
	}
	r.setTask(t)
	return nil
}

// cancelRemote sends tasks/cancel for the remote task, bounded by the peer's
// timeout and independent of the run's (ended) context.
func (r *remoteRun) cancelRemote() {
	id := r.remote()
	if id == "" || r.terminal() {
		return
	}
	ctx, cancel := context.WithTimeout(trace.ContextWithSpan(context.Background(), r.span), r.p.cfg.Timeout)
	defer cancel()
	if t, err := r.client.CancelTask(ctx, &a2a.TaskIDParams{ID: id}); err != nil {
		r.p.log.Warn("tasks/cancel to peer failed", "task_id", r.handle, "err", err)
	} else {
		r.setTask(t)
	}
}

func (r *remoteRun) setTask(t *a2a.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.remoteID == "" {
		r.remoteID = t.ID
	}
	r.task = t
}

func (r *remoteRun) remote() a2a.TaskID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.remoteID
}

func (r *remoteRun) terminal() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.task != nil && r.task.Status.State.Terminal()
}

// stopped reports whether the remote task is as far as it goes without this
// side: ended, or interrupted to ask for input or authentication (a question
// not answered yet: follow asks it, or, with nobody to ask, ResultFromTask
// reads it as refused).
func (r *remoteRun) stopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stoppedLocked()
}

func (r *remoteRun) stoppedLocked() bool {
	if r.task == nil {
		return false
	}
	s := r.task.Status.State
	if s.Terminal() {
		return true
	}
	return (s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired) && questionKey(r.task) != r.answered
}

// refused reports whether err is the peer refusing the protocol version or
// binding it was called in: A2A's VersionNotSupported (-32009), a method it
// does not know (-32601: a 1.0-only peer asked in 0.3, or the reverse), or
// an HTTP status that says the route or the content type is not served, or
// a gRPC status of VERSION_NOT_SUPPORTED or UNIMPLEMENTED (no such service
// or method; a2agrpc reads the latter as a2a.ErrMethodNotFound).
func refused(err error) bool {
	if errors.Is(err, a2acall.ErrVersionNotSupported) || errors.Is(err, a2a.ErrMethodNotFound) {
		return true
	}
	var g *a2agrpc.Error
	if errors.As(err, &g) && g.Reason == "VERSION_NOT_SUPPORTED" {
		return true
	}
	var h *a2acall.HTTPError
	return errors.As(err, &h) && (h.Code == http.StatusNotFound || h.Code == http.StatusMethodNotAllowed || h.Code == http.StatusUnsupportedMediaType)
}

// partial is the result of a run this side ended: the status it ended with,
// and whatever the peer had produced and reported so far.
func (r *remoteRun) partial(status api.TerminalStatus, detail string) api.SubagentResult {
	r.mu.Lock()
	t := r.task
	r.mu.Unlock()
	res := api.SubagentResult{Status: status, Detail: detail}
	if t != nil {
		got := a2abind.ResultFromTask(t, r.agentd)
		res.Distillate, res.Usage = got.Distillate, got.Usage
	}
	return res
}
