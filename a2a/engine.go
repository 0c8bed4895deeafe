package a2a

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/api"
)

// ErrDraining refuses new work while the service drains.
var ErrDraining = errors.New("agentd is draining: no new work is accepted")

// errTaskFinished refuses an event for a task that has already ended.
var errTaskFinished = errors.New("a2a: task already in a terminal state")

// subscriberBuffer is how many events a slow subscriber may lag before it is
// dropped; the executor never waits on a subscriber.
const subscriberBuffer = 256

// MaxFollowUps is how many follow-up messages may wait for a running task.
const MaxFollowUps = 16

// Engine is agentd's implementation of a2asrv.RequestHandler: it owns task
// lifecycles over the bounded Store, runs an a2asrv.AgentExecutor per incoming
// message, fans events out to streaming subscribers, and guarantees that every
// task it starts reaches a terminal state, even when the executor errors,
// panics, or returns without a final event. It is safe for concurrent use;
// create it with NewEngine.
type Engine struct {
	store    *Store
	exec     a2asrv.AgentExecutor
	log      *slog.Logger
	sendWait time.Duration // 0: a blocking send waits for the end
	pusher   *Pusher       // nil: push notifications are not offered

	mu       sync.Mutex // guards live, draining
	live     map[a2a.TaskID]*liveTask
	draining bool
	wg       sync.WaitGroup // executor goroutines
}

// EngineOption configures an Engine.
type EngineOption func(*Engine)

// WithSendWait bounds how long a blocking message/send (or SendMessage) holds
// the request: past d it answers with the task as it stands (working), and the
// client follows it with tasks/get, a subscription or push notifications. Zero
// (the default) waits until the task ends, as the protocol's blocking mode
// describes.
func WithSendWait(d time.Duration) EngineOption {
	return func(e *Engine) { e.sendWait = d }
}

// WithPusher turns push notifications on: the push-config methods work and
// every event of a task with webhooks is delivered through p.
func WithPusher(p *Pusher) EngineOption {
	return func(e *Engine) { e.pusher = p }
}

var _ a2asrv.RequestHandler = (*Engine)(nil)

// liveTask is a task that has not reached a terminal state.
type liveTask struct {
	mu   sync.Mutex // guards task, subs
	task *a2a.Task  // current snapshot, immutable
	subs map[*subscriber]struct{}
	done chan struct{} // closed when the task turns terminal

	// cancelExec cancels the executor run that drives the task; nil for tasks
	// driven from outside (nested subagents).
	cancelExec context.CancelCauseFunc

	followUps []*a2a.Message // sent to the task, not yet taken by the executor
	closed    bool           // the executor takes no more follow-ups
}

type subscriber struct {
	ch      chan a2a.Event
	dropped bool
}

// NewEngine returns an engine running exec over store.
func NewEngine(store *Store, exec a2asrv.AgentExecutor, log *slog.Logger, opts ...EngineOption) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{store: store, exec: exec, log: log, live: make(map[a2a.TaskID]*liveTask)}
	for _, o := range opts {
		o(e)
	}
	return e
}

// PushEnabled reports whether push notifications are offered.
func (e *Engine) PushEnabled() bool { return e.pusher != nil }

// Drain refuses new messages from now on; running tasks continue.
func (e *Engine) Drain() {
	e.mu.Lock()
	e.draining = true
	e.mu.Unlock()
}

// Wait blocks until every executor run has returned and every queued push
// notification has been delivered (or given up on), or ctx ends.
func (e *Engine) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if e.pusher != nil {
		return e.pusher.Wait(ctx)
	}
	return nil
}

// InFlight returns the number of tasks not yet in a terminal state.
func (e *Engine) InFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.live)
}

// Store returns the engine's task store.
func (e *Engine) Store() *Store { return e.store }

// OpenTask registers a task driven from outside the engine (a nested subagent
// of the tree whose root task is root) and stores its first snapshot. The
// task belongs to whoever created root: only that caller (or an operator)
// reads it, cancels it or subscribes to it. Events for it arrive through
// Update.
func (e *Engine) OpenTask(t *a2a.Task, root a2a.TaskID) error {
	lt := &liveTask{task: t, done: make(chan struct{})}
	_, owner, _ := e.store.GetOwned(root)
	if err := e.store.Create(t, owner); err != nil {
		return err
	}
	e.mu.Lock()
	e.live[t.ID] = lt
	e.mu.Unlock()
	return nil
}

// Update applies an event to a live task.
func (e *Engine) Update(id a2a.TaskID, ev a2a.Event) error {
	lt := e.getLive(id)
	if lt == nil {
		return fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id)
	}
	return e.apply(lt, ev)
}

func (e *Engine) getLive(id a2a.TaskID) *liveTask {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live[id]
}

// apply folds one event into the task, stores the new snapshot and fans the
// event out. Events after the terminal one are refused.
func (e *Engine) apply(lt *liveTask, ev a2a.Event) error {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.task.Status.State.Terminal() {
		return errTaskFinished
	}
	next, err := nextSnapshot(lt.task, ev)
	if err != nil {
		return err
	}
	if err := e.store.Put(next); err != nil {
		return err
	}
	lt.task = next
	if e.pusher != nil {
		if targets, _ := e.store.ListPush(next.ID); len(targets) > 0 {
			e.pusher.Enqueue(next.ID, ev, next)
		}
	}
	for s := range lt.subs {
		select {
		case s.ch <- ev:
		default:
			s.dropped = true
			close(s.ch)
			delete(lt.subs, s)
		}
	}
	if next.Status.State.Terminal() {
		for s := range lt.subs {
			close(s.ch)
		}
		lt.subs = nil
		close(lt.done)
		e.mu.Lock()
		delete(e.live, next.ID)
		e.mu.Unlock()
	}
	return nil
}

// nextSnapshot returns a new snapshot: the old one with ev applied. Slices of
// the old snapshot are never appended to in place.
func nextSnapshot(old *a2a.Task, ev a2a.Event) (*a2a.Task, error) {
	t := *old
	switch v := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		if v.TaskID != old.ID {
			return nil, fmt.Errorf("a2a: status update for task %s applied to %s", v.TaskID, old.ID)
		}
		if old.Status.Message != nil {
			t.History = append(slices.Clip(old.History), old.Status.Message)
		}
		t.Metadata = mergeMeta(old.Metadata, v.Metadata)
		t.Status = v.Status
		if t.Status.Timestamp == nil {
			t.Status.Timestamp = now()
		}
	case *a2a.TaskArtifactUpdateEvent:
		if v.TaskID != old.ID || v.Artifact == nil {
			return nil, fmt.Errorf("a2a: bad artifact update for task %s", old.ID)
		}
		i := slices.IndexFunc(old.Artifacts, func(a *a2a.Artifact) bool { return a.ID == v.Artifact.ID })
		switch {
		case i < 0:
			t.Artifacts = append(slices.Clip(old.Artifacts), v.Artifact)
		case v.Append:
			merged := *old.Artifacts[i]
			merged.Parts = append(slices.Clip(merged.Parts), v.Artifact.Parts...)
			t.Artifacts = slices.Clone(old.Artifacts)
			t.Artifacts[i] = &merged
		default:
			t.Artifacts = slices.Clone(old.Artifacts)
			t.Artifacts[i] = v.Artifact
		}
	case *a2a.Task:
		if v.ID != old.ID {
			return nil, fmt.Errorf("a2a: task %s applied to %s", v.ID, old.ID)
		}
		t = *v
	default:
		return nil, fmt.Errorf("a2a: unexpected event %T for a task", ev)
	}
	return &t, nil
}

func mergeMeta(old, add map[string]any) map[string]any {
	if len(add) == 0 {
		return old
	}
	m := make(map[string]any, len(old)+len(add))
	for k, v := range old {
		m[k] = v
	}
	for k, v := range add {
		m[k] = v
	}
	return m
}

// subscribe returns a channel of the task's events from now on, and the
// snapshot at the moment of subscription. The channel closes when the task
// ends (or the subscriber falls too far behind).
func (lt *liveTask) subscribe() (*subscriber, *a2a.Task) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	s := &subscriber{ch: make(chan a2a.Event, subscriberBuffer)}
	if lt.task.Status.State.Terminal() {
		close(s.ch)
		return s, lt.task
	}
	if lt.subs == nil {
		lt.subs = make(map[*subscriber]struct{})
	}
	lt.subs[s] = struct{}{}
	return s, lt.task
}

func (lt *liveTask) unsubscribe(s *subscriber) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if _, ok := lt.subs[s]; ok {
		delete(lt.subs, s)
		close(s.ch)
	}
}

func (lt *liveTask) snapshot() *a2a.Task {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.task
}

// queue is the eventqueue.Queue an executor writes a task's events to. It also
// hands the executor the follow-up messages sent to the task (FollowUps).
type queue struct {
	e  *Engine
	lt *liveTask
}

func (q queue) Write(ctx context.Context, ev a2a.Event) error { return q.e.apply(q.lt, ev) }
func (q queue) Read(ctx context.Context) (a2a.Event, error) {
	return nil, errors.New("a2a: the task queue is write-only")
}
func (q queue) Close() error { return nil }

// TakeFollowUp implements FollowUps.
func (q queue) TakeFollowUp(last bool) []*a2a.Message {
	lt := q.lt
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if len(lt.followUps) > 0 {
		msgs := lt.followUps
		lt.followUps = nil
		return msgs
	}
	if last {
		lt.closed = true
	}
	return nil
}

var _ eventqueue.Queue = queue{}

// FollowUps is implemented by the event queue the Engine hands an executor:
// it delivers the follow-up messages clients send to the task while it runs
// (message/send with the task's id), in arrival order.
type FollowUps interface {
	// TakeFollowUp returns the follow-ups that arrived since the last call, or
	// nil. With last set and none waiting, the task takes no more follow-ups
	// from then on: the executor is about to finish it, and a follow-up sent
	// later is refused as if the task had already ended.
	TakeFollowUp(last bool) []*a2a.Message
}

// start creates a task for a new message and runs the executor on it in the
// background, or hands a follow-up message to the task it names. The caller
// may subscribe before the executor starts.
func (e *Engine) start(ctx context.Context, params *a2a.MessageSendParams) (*liveTask, error) {
	if err := ValidateSendParams(params); err != nil {
		return nil, err
	}
	var push *PushTarget
	if params.Config != nil && params.Config.PushConfig != nil {
		t, err := e.pushTarget(ctx, params.Config.PushConfig)
		if err != nil {
			return nil, err
		}
		push = &t
	}
	msg := params.Message
	if msg.TaskID != "" {
		if _, err := e.visible(ctx, msg.TaskID); err != nil {
			return nil, err
		}
		return e.followUp(msg, push)
	}
	// The draining check and counting the executor for Wait are one step: a
	// drain that begins after it waits for this task.
	e.mu.Lock()
	if e.draining {
		e.mu.Unlock()
		return nil, ErrDraining
	}
	e.wg.Add(1)
	e.mu.Unlock()
	started := false
	defer func() {
		if !started {
			e.wg.Done()
		}
	}()
	m := *msg
	m.TaskID = a2a.NewTaskID()
	if m.ContextID == "" {
		m.ContextID = a2a.NewContextID()
	}
	task := &a2a.Task{
		ID:        m.TaskID,
		ContextID: m.ContextID,
		Status:    a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: now()},
		History:   []*a2a.Message{&m},
		Metadata:  params.Metadata,
	}
	if err := e.store.Create(task, callerName(ctx)); err != nil {
		return nil, err
	}
	if push != nil {
		if _, err := e.store.SetPush(task.ID, *push); err != nil {
			return nil, err
		}
	}
	execCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	lt := &liveTask{task: task, done: make(chan struct{}), cancelExec: cancel}
	e.mu.Lock()
	e.live[task.ID] = lt
	e.mu.Unlock()
	reqCtx := &a2asrv.RequestContext{Message: &m, TaskID: task.ID, ContextID: task.ContextID, Metadata: params.Metadata}
	started = true
	go e.run(execCtx, cancel, lt, reqCtx)
	return lt, nil
}

// followUp adds a message to a running task: it joins the task's history and
// waits for the executor, which takes it as the task's next turn. A finished
// task takes no more messages (a refinement is a new task, which may name this
// one in referenceTaskIds).
func (e *Engine) followUp(msg *a2a.Message, push *PushTarget) (*liveTask, error) {
	id := msg.TaskID
	lt := e.getLive(id)
	if lt == nil {
		t, ok := e.store.Get(id)
		if !ok {
			return nil, fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id)
		}
		return nil, fmt.Errorf("task %s is %s and takes no more messages; send a new message (its referenceTaskIds may name this task): %w", id, t.Status.State, a2a.ErrUnsupportedOperation)
	}
	if lt.cancelExec == nil {
		return nil, fmt.Errorf("task %s is a nested subagent, driven by its parent; it takes no messages: %w", id, a2a.ErrUnsupportedOperation)
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	cur := lt.task
	if msg.ContextID != "" && msg.ContextID != cur.ContextID {
		return nil, fmt.Errorf("message.contextId %q is not task %s's context %q: %w", msg.ContextID, id, cur.ContextID, a2a.ErrInvalidParams)
	}
	if lt.closed || cur.Status.State.Terminal() {
		return nil, fmt.Errorf("task %s is finishing and takes no more messages: %w", id, a2a.ErrUnsupportedOperation)
	}
	if len(lt.followUps) >= MaxFollowUps {
		return nil, fmt.Errorf("task %s already has %d follow-up messages waiting: %w", id, MaxFollowUps, a2a.ErrUnsupportedOperation)
	}
	m := *msg
	m.ContextID = cur.ContextID
	next := *cur
	next.History = append(slices.Clip(cur.History), &m)
	if err := e.store.Put(&next); err != nil {
		return nil, err
	}
	if push != nil {
		if _, err := e.store.SetPush(id, *push); err != nil {
			return nil, err
		}
	}
	lt.task = &next
	lt.followUps = append(lt.followUps, &m)
	return lt, nil
}

// callerName is the authenticated caller of the request, or "".
func callerName(ctx context.Context) string {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil && cc.User.Authenticated() {
		return cc.User.Name()
	}
	return ""
}

// OperatorUser is implemented by an a2asrv.User that may have the operator
// role (the HTTP front's identity): an operator may read and cancel every
// task.
type OperatorUser interface {
	Operator() bool
}

// mayAccess reports whether the caller of ctx may see a task created by
// owner: its creator (nested tasks belong to their root's creator), or an
// operator. In the loopback development mode every caller is the same
// anonymous peer, and so is the creator of every task.
func mayAccess(ctx context.Context, owner string) bool {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil {
		if op, ok := cc.User.(OperatorUser); ok && op.Operator() {
			return true
		}
	}
	return callerName(ctx) == owner
}

// errNotFound is the answer for an unknown task and for someone else's: the
// two are indistinguishable, so a task id is never confirmed to a caller
// that may not see the task.
func errNotFound(id a2a.TaskID) error { return fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id) }

// visible returns the task with this id if the caller of ctx may see it.
func (e *Engine) visible(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	t, owner, ok := e.store.GetOwned(id)
	if !ok || !mayAccess(ctx, owner) {
		return nil, errNotFound(id)
	}
	return t, nil
}

// run drives one executor and makes sure its task ends terminal.
func (e *Engine) run(ctx context.Context, cancel context.CancelCauseFunc, lt *liveTask, reqCtx *a2asrv.RequestContext) {
	defer e.wg.Done()
	defer cancel(nil)
	var err error
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("executor panic: %v", r)
			e.log.Error("executor panicked", "task_id", reqCtx.TaskID, "panic", r, "stack", string(debug.Stack()))
		}
		if lt.snapshot().Status.State.Terminal() {
			return
		}
		text := "the executor ended without a final state"
		if err != nil {
			text = "the executor failed: " + err.Error()
		}
		e.log.Error("forcing task to failed", "task_id", reqCtx.TaskID, "err", err)
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: text}))
		ev.Final = true
		ev.Metadata = map[string]any{MetaStatus: string(api.StatusCrashed)}
		_ = e.apply(lt, ev)
	}()
	err = e.exec.Execute(ctx, reqCtx, queue{e: e, lt: lt})
}

// OnSendMessage handles message/send: it starts a task and, unless the client
// asked not to block, waits for it to end.
func (e *Engine) OnSendMessage(ctx context.Context, params *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	lt, err := e.start(ctx, params)
	if err != nil {
		return nil, err
	}
	hist := historyLength(params)
	if params.Config != nil && params.Config.Blocking != nil && !*params.Config.Blocking {
		return trimHistory(lt.snapshot(), hist), nil
	}
	var timeout <-chan time.Time
	if e.sendWait > 0 {
		t := time.NewTimer(e.sendWait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-lt.done:
	case <-timeout:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return trimHistory(lt.snapshot(), hist), nil
}

// OnSendMessageStream handles message/stream: the task first, then every event
// until the terminal one.
func (e *Engine) OnSendMessageStream(ctx context.Context, params *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		lt, err := e.start(ctx, params)
		if err != nil {
			yield(nil, err)
			return
		}
		e.stream(ctx, lt, yield)
	}
}

// OnResubscribeToTask handles tasks/resubscribe: the current task, then its
// events until it ends. A finished task yields its final snapshot and ends.
func (e *Engine) OnResubscribeToTask(ctx context.Context, params *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if params == nil || params.ID == "" {
			yield(nil, fmt.Errorf("missing task id: %w", a2a.ErrInvalidParams))
			return
		}
		t, err := e.visible(ctx, params.ID)
		if err != nil {
			yield(nil, err)
			return
		}
		lt := e.getLive(params.ID)
		if lt == nil {
			yield(t, nil)
			return
		}
		e.stream(ctx, lt, yield)
	}
}

func (e *Engine) stream(ctx context.Context, lt *liveTask, yield func(a2a.Event, error) bool) {
	sub, first := lt.subscribe()
	defer lt.unsubscribe(sub)
	if !yield(first, nil) {
		return
	}
	if first.Status.State.Terminal() {
		return
	}
	for {
		select {
		case ev, ok := <-sub.ch:
			if !ok {
				if sub.dropped {
					yield(nil, fmt.Errorf("stream subscriber fell behind: %w", a2a.ErrInternalError))
				}
				return
			}
			if !yield(ev, nil) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// OnGetTask handles tasks/get, on any handle: roots and nested subagents. Like
// every method on one task, it answers only the task's creator (or an
// operator); anyone else is told the task does not exist.
func (e *Engine) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	if q == nil || q.ID == "" {
		return nil, fmt.Errorf("missing task id: %w", a2a.ErrInvalidParams)
	}
	if q.HistoryLength != nil && *q.HistoryLength < 0 {
		return nil, fmt.Errorf("historyLength must not be negative: %w", a2a.ErrInvalidParams)
	}
	t, err := e.visible(ctx, q.ID)
	if err != nil {
		return nil, err
	}
	return trimHistory(t, q.HistoryLength), nil
}

// OnCancelTask handles tasks/cancel: it stops the task's subtree (the kill
// ladder) and returns the task once it is terminal.
func (e *Engine) OnCancelTask(ctx context.Context, params *a2a.TaskIDParams) (*a2a.Task, error) {
	if params == nil || params.ID == "" {
		return nil, fmt.Errorf("missing task id: %w", a2a.ErrInvalidParams)
	}
	t, err := e.visible(ctx, params.ID)
	if err != nil {
		return nil, err
	}
	lt := e.getLive(params.ID)
	if lt == nil {
		return nil, fmt.Errorf("task %s is %s: %w", t.ID, t.Status.State, a2a.ErrTaskNotCancelable)
	}
	if lt.cancelExec != nil {
		lt.cancelExec(errCancelRequested)
	} else {
		snap := lt.snapshot()
		reqCtx := &a2asrv.RequestContext{TaskID: snap.ID, ContextID: snap.ContextID, StoredTask: snap, Metadata: params.Metadata}
		if err := e.exec.Cancel(ctx, reqCtx, queue{e: e, lt: lt}); err != nil {
			if errors.Is(err, errTaskFinished) {
				// It ended on its own meanwhile.
				return nil, fmt.Errorf("task %s is %s: %w", snap.ID, lt.snapshot().Status.State, a2a.ErrTaskNotCancelable)
			}
			return nil, err
		}
	}
	select {
	case <-lt.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return lt.snapshot(), nil
}

// errCancelRequested is the cause an executor's context carries after
// tasks/cancel.
var errCancelRequested = errors.New("task cancelled by tasks/cancel")

// pushTarget checks a webhook registration against the address policy.
func (e *Engine) pushTarget(ctx context.Context, c *a2a.PushConfig) (PushTarget, error) {
	if e.pusher == nil {
		return PushTarget{}, a2a.ErrPushNotificationNotSupported
	}
	if c.URL == "" {
		return PushTarget{}, fmt.Errorf("pushNotificationConfig.url is required: %w", a2a.ErrInvalidParams)
	}
	if err := e.pusher.Policy().CheckURL(ctx, c.URL); err != nil {
		return PushTarget{}, fmt.Errorf("%w: %w", a2a.ErrInvalidParams, err)
	}
	t := PushTarget{Config: *c, Version: VersionFrom(ctx)}
	if t.Config.ID == "" && t.Version == Version03 {
		// In 0.3 a client names a config only to register several; one
		// without a name is the task's default callback, and registering
		// another replaces it. (1.0 servers assign every config an id.)
		t.Config.ID = DefaultPushConfigID
	}
	return t, nil
}

// DefaultPushConfigID is the id of a push config registered through A2A 0.3
// without one.
const DefaultPushConfigID = "default"

// OnSetTaskPushConfig registers a webhook for a task (checked against the
// address policy) and returns it with its id.
func (e *Engine) OnSetTaskPushConfig(ctx context.Context, params *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	if e.pusher == nil {
		return nil, a2a.ErrPushNotificationNotSupported
	}
	if params == nil || params.TaskID == "" {
		return nil, fmt.Errorf("taskId is required: %w", a2a.ErrInvalidParams)
	}
	if _, err := e.visible(ctx, params.TaskID); err != nil {
		return nil, err
	}
	t, err := e.pushTarget(ctx, &params.Config)
	if err != nil {
		return nil, err
	}
	stored, err := e.store.SetPush(params.TaskID, t)
	if err != nil {
		return nil, err
	}
	return &a2a.TaskPushConfig{TaskID: params.TaskID, Config: stored.Config}, nil
}

// OnGetTaskPushConfig returns a task's webhook; without a config id, the most
// recently registered one.
func (e *Engine) OnGetTaskPushConfig(ctx context.Context, params *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	if e.pusher == nil {
		return nil, a2a.ErrPushNotificationNotSupported
	}
	if params == nil || params.TaskID == "" {
		return nil, fmt.Errorf("id is required: %w", a2a.ErrInvalidParams)
	}
	if _, err := e.visible(ctx, params.TaskID); err != nil {
		return nil, err
	}
	t, err := e.store.GetPush(params.TaskID, params.ConfigID)
	if err != nil {
		return nil, err
	}
	return &a2a.TaskPushConfig{TaskID: params.TaskID, Config: t.Config}, nil
}

// OnListTaskPushConfig returns a task's webhooks (an empty list when none).
func (e *Engine) OnListTaskPushConfig(ctx context.Context, params *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	if e.pusher == nil {
		return nil, a2a.ErrPushNotificationNotSupported
	}
	if params == nil || params.TaskID == "" {
		return nil, fmt.Errorf("id is required: %w", a2a.ErrInvalidParams)
	}
	if _, err := e.visible(ctx, params.TaskID); err != nil {
		return nil, err
	}
	targets, err := e.store.ListPush(params.TaskID)
	if err != nil {
		return nil, err
	}
	out := make([]*a2a.TaskPushConfig, 0, len(targets))
	for _, t := range targets {
		out = append(out, &a2a.TaskPushConfig{TaskID: params.TaskID, Config: t.Config})
	}
	return out, nil
}

// OnDeleteTaskPushConfig removes a task's webhook; deleting one that does not
// exist succeeds.
func (e *Engine) OnDeleteTaskPushConfig(ctx context.Context, params *a2a.DeleteTaskPushConfigParams) error {
	if e.pusher == nil {
		return a2a.ErrPushNotificationNotSupported
	}
	if params == nil || params.TaskID == "" {
		return fmt.Errorf("id is required: %w", a2a.ErrInvalidParams)
	}
	if _, err := e.visible(ctx, params.TaskID); err != nil {
		return err
	}
	return e.store.DeletePush(params.TaskID, params.ConfigID)
}

// ListTasks returns one page of the tasks the caller created, most recently
// updated first (A2A 1.0 ListTasks; 0.3 has no such method).
func (e *Engine) ListTasks(ctx context.Context, q ListQuery) (ListPage, error) {
	q.Owner = callerName(ctx)
	return e.store.List(q)
}

// OnGetExtendedAgentCard reports that there is no extended card.
func (e *Engine) OnGetExtendedAgentCard(ctx context.Context) (*a2a.AgentCard, error) {
	return nil, a2a.ErrAuthenticatedExtendedCardNotConfigured
}

func historyLength(p *a2a.MessageSendParams) *int {
	if p.Config == nil {
		return nil
	}
	return p.Config.HistoryLength
}

// trimHistory returns t with at most n history messages (the latest), sharing
// everything else.
func trimHistory(t *a2a.Task, n *int) *a2a.Task {
	if n == nil || *n >= len(t.History) {
		return t
	}
	c := *t
	if *n <= 0 {
		c.History = nil
	} else {
		c.History = t.History[len(t.History)-*n:]
	}
	return &c
}

// ValidateSendParams checks a message before a task exists for it: a message
// with an id, a role, and at least one well-formed part.
func ValidateSendParams(p *a2a.MessageSendParams) error {
	if p == nil || p.Message == nil {
		return fmt.Errorf("params.message is required: %w", a2a.ErrInvalidParams)
	}
	m := p.Message
	if m.ID == "" {
		return fmt.Errorf("message.messageId is required: %w", a2a.ErrInvalidParams)
	}
	if m.Role != a2a.MessageRoleUser && m.Role != a2a.MessageRoleAgent {
		return fmt.Errorf("message.role must be \"user\" or \"agent\": %w", a2a.ErrInvalidParams)
	}
	if len(m.Parts) == 0 {
		return fmt.Errorf("message.parts must not be empty: %w", a2a.ErrInvalidParams)
	}
	for i, part := range m.Parts {
		switch v := part.(type) {
		case a2a.TextPart:
		case a2a.DataPart:
			if v.Data == nil {
				return fmt.Errorf("message.parts[%d]: a data part needs data: %w", i, a2a.ErrInvalidParams)
			}
		case a2a.FilePart:
		default:
			return fmt.Errorf("message.parts[%d]: unknown part: %w", i, a2a.ErrInvalidParams)
		}
	}
	if p.Config != nil && p.Config.HistoryLength != nil && *p.Config.HistoryLength < 0 {
		return fmt.Errorf("configuration.historyLength must not be negative: %w", a2a.ErrInvalidParams)
	}
	return nil
}
