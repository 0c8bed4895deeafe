package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/internal/admit"
)

// ErrDraining refuses new work while the service drains.
var ErrDraining = errors.New("tasks: draining: no new work is accepted")

// errTaskFinished refuses an event for a task that has already ended.
var errTaskFinished = errors.New("tasks: task already in a terminal state")

// subscriberBuffer is how many events a slow subscriber may lag before it is
// dropped; the executor never waits on a subscriber.
const subscriberBuffer = 256

// MaxFollowUps is how many follow-up messages may wait for a running task.
const MaxFollowUps = 16

// Engine is agentd's implementation of a2asrv.RequestHandler: it owns task
// lifecycles over a Store, runs an a2asrv.AgentExecutor per incoming
// message, fans events out to streaming subscribers, and guarantees that every
// task it starts reaches a terminal state, even when the executor errors,
// panics, or returns without a final event. It is safe for concurrent use;
// create it with NewEngine.
type Engine struct {
	// startedHook, when set (tests only), runs right after a task's
	// executor is started (launch.start).
	startedHook func(*liveTask)
	// followedHook, when set (tests only), runs right after a follow-up
	// message joined its task, before its send is answered.
	followedHook func()

	store    Store
	exec     a2asrv.AgentExecutor
	log      *slog.Logger
	sendWait time.Duration // 0: a blocking send waits for the end
	// writeDelay bounds how long a change no one can see waits before it
	// is written (lazy.go); 0 writes every change at once.
	writeDelay    time.Duration
	writeDelaySet bool
	eagerRetain   bool // retained payloads are written at once (the rerun policy needs them)
	// leaveOrphan, if set, keeps Recover off the orphans it reports.
	leaveOrphan func(*a2a.Task) bool
	// storeRetry bounds how long an event of a running task waits for an
	// unavailable store before the write fails.
	storeRetry time.Duration
	// storeWait bounds how long a caller's request waits for an
	// unavailable store (storewait.go).
	storeWait time.Duration
	pusher    *Pusher // nil: push notifications are not offered
	// ends, when set, journals each end's notification in the terminal
	// write's transaction (the store, when it is the pusher's journal).
	ends EndJournal

	admission *admit.Controller // nil: every task runs at once (admission.go)
	policy    admit.Policy

	offload      Offloader // nil: finished tasks keep their parts (offload.go)
	offloadAbove int

	mu       sync.Mutex // guards live, draining
	live     map[a2a.TaskID]*liveTask
	draining bool
	wg       sync.WaitGroup // executor goroutines
	runners  runners        // the goroutines executor runs run on
}

// EngineOption configures an Engine.
type EngineOption func(*Engine)

// WithSendWait bounds how long a blocking message/send (or SendMessage) holds
// the request: past d it answers with the task as it stands (working), and the
// client follows it with tasks/get, a subscription or push notifications. Zero
// (the default) waits until the task ends or is interrupted (input-required:
// answer.go), as both protocol versions describe a blocking send (A2A 1.0
// §3.2.2: until a terminal or interrupted state). A
// non-zero d is an operator's deliberate deviation from that, for 0.3 and 1.0
// alike; a client that wants the running task at once asks for it instead
// (0.3 blocking false, 1.0 returnImmediately).
func WithSendWait(d time.Duration) EngineOption {
	return func(e *Engine) { e.sendWait = d }
}

// DefaultStoreRetry is how long an event of a running task waits, by default,
// for a store that is unavailable.
const DefaultStoreRetry = 30 * time.Second

// WithStoreRetry bounds how long an event of a running task is retried while
// the store is unavailable (ErrStoreUnavailable); 0 does not retry.
func WithStoreRetry(d time.Duration) EngineOption {
	return func(e *Engine) { e.storeRetry = d }
}

// WithPusher turns push notifications on: the push-config methods work and
// every event of a task with webhooks is delivered through p.
func WithPusher(p *Pusher) EngineOption {
	return func(e *Engine) { e.pusher = p }
}

var _ a2asrv.RequestHandler = (*Engine)(nil)

// Retainer is implemented by the event queue the Engine hands an executor
// when its store is Durable, and only then: Retain keeps the payload the
// executor would run the task from again (a Rerunner reads it back). Over
// another store there is nothing to encode a payload for.
type Retainer interface {
	Retain(ctx context.Context, payload []byte) error
}

// Rerunner is implemented by an executor that can run a task again from the
// payload it retained (the rerun recovery policy). Rerun is Execute for a
// task that already exists: reqCtx.StoredTask is its snapshot.
type Rerunner interface {
	Rerun(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, payload []byte) error
}

// LostMetadata is implemented by an executor that labels the failed status
// the engine writes for a task whose runner was lost (the fail recovery
// policy, and a rerun that cannot be made).
type LostMetadata interface {
	LostMetadata() map[string]any
}

// FailureMetadata is implemented by an executor that labels the failed status
// the engine writes for a task the executor left unfinished (it returned an
// error, panicked, or returned without a terminal event). The engine calls it
// once per such task; the map becomes that status's metadata.
type FailureMetadata interface {
	FailureMetadata() map[string]any
}

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

// FollowUpChecker is implemented by an executor whose next turn of a task
// carries the follow-up messages waiting for it within a size limit (a
// spawn payload within the control frame limit). Before a follow-up joins
// the task, the engine asks it with the follow-ups that would then wait,
// the new one last; an error (wrapping a2a.ErrInvalidParams and naming the
// limit) refuses the message, and the task goes on. It is called with the
// task's lock held, and must be safe for concurrent use.
type FollowUpChecker interface {
	CheckFollowUp(id a2a.TaskID, waiting []*a2a.Message) error
}

// liveTask is a task that has not reached a terminal state.
type liveTask struct {
	mu    sync.Mutex // guards task, subs, followUps, closed, push, pushKnown, dirty, durable, payload, flushing, pushChecked, lost, streams
	task  *a2a.Task  // current snapshot, immutable
	owner string     // who created it (for a nested task, its root's creator)
	subs  map[*subscriber]struct{}
	done  chan struct{} // closed when the task turns terminal

	// cancelExec cancels the executor run that drives the task; nil for tasks
	// driven from outside (nested subagents).
	cancelExec context.CancelCauseFunc

	// ticket is the task's admission (nil without admission control, and for
	// nested tasks); set at creation, never changed.
	ticket *admit.Ticket

	// (The flags side by side: the struct is 288 bytes, an allocation's
	// size class, where with each on its own it was 304, in one of 320.)
	followUps []*a2a.Message // sent to the task, not yet taken by the executor
	closed    bool           // the executor takes no more follow-ups

	push     bool   // a webhook was registered for it through this engine
	dirty    bool   // task is newer than the stored snapshot: no one has seen it
	flushing bool   // a write of the unwritten change is scheduled
	payload  []byte // a retained payload not stored yet

	pushChecked time.Time // when a Shared store last said it has no webhook (pushed)
	// pushKnown: with a PushWatcher store, push is up to date without a
	// read (the task was created here, or read since), as long as no
	// announcement is lost (pushStale). announced: another process
	// registered a webhook for it (servePushes).
	pushKnown            bool
	announced, pushStale atomic.Bool
	// fenced: another replica took the task over; its run is being stopped
	// and nothing of it is this engine's to end (fence.go).
	fenced atomic.Bool
	// asking: the task waits for an answer (answer.go).
	asking asking
	// durable: a write of the task that the engine waited for has
	// returned, which made the task's creation durable too (Syncer): what
	// is shown of it needs no Sync.
	durable bool
	// lost: the store does not hold the task (its creation was lost, an
	// SQLite commit that failed): what a reader is told instead of a
	// snapshot no one may see.
	lost error

	// stall: a write of the task waits for an unavailable store
	// (putRetrying); a caller waiting for the task's end is answered
	// within the store wait.
	stall stall

	// settled marks a snapshot this engine does not drive (a finished task,
	// or one another process runs): done is closed, and a stream of it is
	// the snapshot alone.
	settled bool

	// streams are the artifacts being streamed to subscribers (stream.go),
	// by id; streamGen numbers each stream begun.
	streams   map[a2a.ArtifactID]*artifactStream
	streamGen uint64

	// hollow is the first message of task, its large text left to the
	// store while the task runs (hollow.go); nil when task holds it whole.
	hollow *a2a.Message
}

// end closes the task's subscriptions and done without a terminal state: the
// engine no longer drives it (its store was lost).
func (lt *liveTask) end() {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for s := range lt.subs {
		s.dropped = true
		close(s.ch)
	}
	lt.subs = nil
	select {
	case <-lt.done:
	default:
		close(lt.done)
	}
}

type subscriber struct {
	ch      chan a2a.Event
	dropped bool
	synced  map[a2a.ArtifactID]uint64 // the stream of each artifact it has been shown from its start (stream.go)
}

// NewEngine returns an engine running exec over store; log nil discards.
func NewEngine(store Store, exec a2asrv.AgentExecutor, log *slog.Logger, opts ...EngineOption) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{store: store, exec: exec, log: log, live: make(map[a2a.TaskID]*liveTask), storeRetry: DefaultStoreRetry, storeWait: DefaultStoreWait}
	e.runners.work = make(chan func())
	for _, o := range opts {
		o(e)
	}
	if _, durable := store.(Durable); durable && !e.writeDelaySet {
		e.writeDelay = DefaultWriteDelay
		if _, shared := store.(Shared); shared {
			e.writeDelay = DefaultSharedWriteDelay
		}
	}
	if _, durable := store.(Durable); !durable {
		e.writeDelay = 0
	}
	if sh, ok := store.(Shared); ok {
		go e.serveCancels(sh)
	}
	if fw, ok := store.(Forwarder); ok {
		go e.serveForwards(fw)
	}
	if ej, ok := store.(EndJournal); ok && e.pusher != nil && e.pusher.journaled(ej) {
		e.ends = ej
	}
	if pw, ok := store.(PushWatcher); ok {
		go e.servePushes(pw)
	}
	if f, ok := store.(Fencing); ok {
		go e.serveFencing(f)
	}
	if sq, ok := e.sharedQueue(); ok {
		e.admission.SetSharedQueue(func() (map[admit.Priority]int, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return sq.QueuedByPriority(ctx)
		})
		go e.serveQueue(sq)
	}
	return e
}

// PushEnabled reports whether push notifications are offered.
func (e *Engine) PushEnabled() bool { return e.pusher != nil }

// Drain refuses new messages from now on; running tasks continue, and tasks
// still queued for admission end canceled without running. No run starts
// once it began: a run claimed from the shared queue meanwhile goes back to
// the queue.
func (e *Engine) Drain() {
	e.mu.Lock()
	e.draining = true
	e.mu.Unlock()
	if e.admission != nil {
		e.admission.Close()
	}
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
func (e *Engine) Store() Store { return e.store }

// TaskStates counts the stored tasks by state (the A2A 0.3 state names:
// submitted, working, completed, ...), for the tasks-by-state metric; nil
// when the store cannot say.
func (e *Engine) TaskStates() map[string]int {
	counts, err := e.store.CountByState(context.Background())
	if err != nil {
		e.log.Warn("tasks not counted", "err", err)
		return nil
	}
	out := make(map[string]int, len(counts))
	for s, n := range counts {
		out[string(s)] = n
	}
	return out
}

// OpenTask registers a task driven from outside the engine (a nested subagent
// of the tree whose root task is root) and stores its first snapshot. The
// task belongs to whoever created root: only that caller (or an operator)
// reads it, cancels it or subscribes to it. Events for it arrive through
// Update. Over a Durable store its large first message is left to the
// store as a new task's is (hollow.go); FirstMessage reads it back.
func (e *Engine) OpenTask(ctx context.Context, t *a2a.Task, root a2a.TaskID) error {
	var owner string
	if r := e.getLive(root); r != nil {
		owner = r.owner
	} else {
		_, o, err := e.store.Get(ctx, root)
		if err != nil && !errors.Is(err, a2a.ErrTaskNotFound) {
			return fmt.Errorf("read root task %s: %w", root, err)
		}
		owner = o
	}
	// Created here: a webhook registered for it elsewhere is announced
	// (PushWatcher).
	lt := &liveTask{task: t, owner: owner, done: make(chan struct{}), pushKnown: true}
	if err := e.store.Create(ctx, t, owner); err != nil {
		return err
	}
	lt.mu.Lock()
	e.hollowLocked(lt) // the store holds the message now
	lt.mu.Unlock()
	e.mu.Lock()
	e.live[t.ID] = lt
	e.mu.Unlock()
	return nil
}

// Update applies an event to a live task.
func (e *Engine) Update(ctx context.Context, id a2a.TaskID, ev a2a.Event) error {
	lt := e.getLive(id)
	if lt == nil {
		return fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id)
	}
	return e.apply(ctx, lt, ev)
}

// ContextOf is the contextId of task id: a live task's from memory, another's
// from the store. A read for one field does not decode the stored task, whose
// first message may be large (a tree's objective): the tree observer asks it
// for every nested task it opens and updates.
func (e *Engine) ContextOf(ctx context.Context, id a2a.TaskID) (string, error) {
	if lt := e.getLive(id); lt != nil {
		lt.mu.Lock()
		defer lt.mu.Unlock()
		return lt.task.ContextID, nil
	}
	t, _, err := e.store.Get(ctx, id)
	if err != nil {
		return "", fmt.Errorf("read task %s: %w", id, err)
	}
	return t.ContextID, nil
}

func (e *Engine) getLive(id a2a.TaskID) *liveTask {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.live[id]
}

// apply folds one event into the task, stores the new snapshot and fans the
// event out. Events after the terminal one are refused. The store write is
// not cut short by ctx's cancellation: the event that records a cancelled
// run arrives on the cancelled run's context.
func (e *Engine) apply(ctx context.Context, lt *liveTask, ev a2a.Event) error {
	ctx = context.WithoutCancel(ctx)
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.task.Status.State.Terminal() {
		return errTaskFinished
	}
	next, err := Apply(lt.task, ev)
	if err != nil {
		return err
	}
	return e.commitLocked(ctx, lt, ev, next)
}

// commitLocked stores next, the task after ev, makes it the task's snapshot
// and fans ev out (subscribers, push). lt.mu is held.
func (e *Engine) commitLocked(ctx context.Context, lt *liveTask, ev a2a.Event, next *a2a.Task) error {
	var err error
	push, ask := e.pushed(ctx, lt, next.ID, next.Status.State.Terminal())
	var seq int64 // the end's notification, journaled by its write
	if lt.hollow != nil && (next.Status.State.Terminal() || push) {
		// What is pushed, and the end the task keeps, hold the first
		// message whole (hollow.go).
		if next, err = e.wholeRetrying(ctx, lt, next); err != nil {
			return e.persisted(lt, err)
		}
	}
	if next.Status.State.Terminal() || push || len(lt.subs) > 0 || e.writeDelay <= 0 {
		stored := next
		if next.Status.State.Terminal() {
			// The final snapshot is stored without its large parts; the
			// live one (what subscribers and a blocking send see) keeps
			// them.
			stored = e.compact(ctx, next, lt.owner)
		}
		if next.Status.State.Terminal() && (push || ask) && e.ends != nil {
			// The write journals the end's notification, if the task has
			// webhooks when it commits (EndJournal).
			if seq, err = e.persistEndLocked(ctx, lt, stored); err != nil {
				return err
			}
			push = seq > 0
		} else if err := e.persistLocked(ctx, lt, stored, e.retryBy()); err != nil {
			return err
		}
	} else {
		e.deferLocked(lt) // no one sees this change yet
	}
	lt.task = next
	if next.Status.State.Terminal() {
		lt.hollow = nil
	}
	lt.noteStateLocked(next.Status.State)
	switch {
	case seq > 0:
		e.pusher.EnqueueJournaled(next.ID, ev, next, seq)
	case push:
		e.pusher.Enqueue(next.ID, ev, next)
	}
	for s := range lt.subs {
		lt.sendLocked(s, lt.shownLocked(s, ev))
	}
	lt.endStreamLocked(ev)
	if next.Status.State.Terminal() {
		for s := range lt.subs {
			close(s.ch)
		}
		lt.subs = nil
		select {
		case <-lt.done: // ended without a terminal state before (end)
		default:
			close(lt.done)
		}
		e.forget(next.ID)
	}
	return nil
}

// retryBy is the deadline of a task's own write that starts now: storeRetry
// from now.
func (e *Engine) retryBy() time.Time { return time.Now().Add(e.storeRetry) }

// putRetrying stores a snapshot of lt, retrying until deadline while the
// store is unavailable (a database restarting): the event waits, and no one
// sees it before it is stored. Meanwhile lt.stall says a write waits (a
// caller waiting for the task's end is answered within the store wait).
func (e *Engine) putRetrying(ctx context.Context, lt *liveTask, t *a2a.Task, put func(context.Context, *a2a.Task) error, deadline time.Time) error {
	wait := 50 * time.Millisecond
	defer lt.stall.end()
	for {
		err := put(ctx, t)
		if err == nil || !errors.Is(err, ErrStoreUnavailable) || time.Now().Add(wait).After(deadline) {
			return err
		}
		lt.stall.begin()
		e.log.Warn("task store unavailable: retrying", "task_id", string(t.ID), "err", err)
		time.Sleep(wait)
		wait = min(2*wait, 2*time.Second)
	}
}

// subscribe returns a channel of the task's events from now on, and the
// snapshot at the moment of subscription (stored first, if it was not). The
// channel closes when the task ends (or the subscriber falls too far
// behind).
func (e *Engine) subscribe(ctx context.Context, lt *liveTask) (*subscriber, *a2a.Task, error) {
	by := e.answerBy()
	if err := e.lockBy(ctx, lt, by); err != nil {
		return nil, nil, err
	}
	defer lt.mu.Unlock()
	if lt.dirty && !lt.task.Status.State.Terminal() {
		if err := e.persistLocked(context.WithoutCancel(ctx), lt, lt.task, by); err != nil {
			return nil, nil, err
		}
	}
	if !lt.durable {
		if err := e.syncLocked(ctx, lt); err != nil {
			return nil, nil, err
		}
	}
	s, t := lt.subscribeLocked()
	whole, err := e.wholeLocked(ctx, lt, t)
	if err != nil {
		lt.unsubscribeLocked(s)
		return nil, nil, err
	}
	return s, whole, nil
}

func (lt *liveTask) subscribeLocked() (*subscriber, *a2a.Task) {
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
	lt.unsubscribeLocked(s)
}

func (lt *liveTask) unsubscribeLocked(s *subscriber) {
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

func (q queue) Write(ctx context.Context, ev a2a.Event) error { return q.e.apply(ctx, q.lt, ev) }
func (q queue) Read(ctx context.Context) (a2a.Event, error) {
	return nil, errors.New("tasks: the task queue is write-only")
}
func (q queue) Close() error { return nil }

// retainingQueue is the queue of a task whose store is Durable: only it
// implements Retainer, so an executor over a store that keeps nothing past
// the process does not encode a payload to have it dropped.
type retainingQueue struct{ queue }

// events is the queue handed to the executor: a retainingQueue when the
// store is Durable.
func (q queue) events() eventqueue.Queue {
	if _, ok := q.e.store.(Durable); ok {
		return retainingQueue{q}
	}
	return q
}

// Retain implements Retainer: the payload is kept with the task for the
// rerun recovery policy.
func (q retainingQueue) Retain(ctx context.Context, payload []byte) error {
	d := q.e.store.(Durable)
	lt := q.lt
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if q.e.writeDelay > 0 && !q.e.eagerRetain {
		// Written with the task's next write: a task that ends first never
		// needs it.
		lt.payload = payload
		q.e.scheduleLocked(lt)
		return nil
	}
	return d.Retain(context.WithoutCancel(ctx), lt.task.ID, payload)
}

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

var (
	_ eventqueue.Queue = queue{}
	_ Retainer         = retainingQueue{}
	_ FollowUps        = retainingQueue{}
)

// start creates a task for a new message and runs the executor on it in the
// background, or hands a follow-up message to the task it names. The caller
// may subscribe before the executor starts.
func (e *Engine) start(ctx context.Context, params *a2a.MessageSendParams) (*liveTask, error) {
	return e.startWatched(ctx, params, nil)
}

// earlySub is what a caller answered before its new task ends gets of the
// task before its executor starts: a stream's subscription, so that an
// executor that ends at once cannot end the task before the stream has seen
// its events, or (answerOnly) a non-blocking send's answer alone, so that
// nothing done after the run started (a write of a newer snapshot, on a
// full disk) can answer its send with an error.
type earlySub struct {
	answerOnly bool // take first only, not a subscription
	sub        *subscriber
	first      *a2a.Task
}

// startWatched is start; with early non-nil, a new task that runs here is
// synced, then subscribed to (into early), or its synced snapshot taken
// (answerOnly), before its executor starts; a follow-up message that joins
// its task gives early (answerOnly) the snapshot stored with it.
func (e *Engine) startWatched(ctx context.Context, params *a2a.MessageSendParams, early *earlySub) (*liveTask, error) {
	if err := validateSendParams(params); err != nil {
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
		lt, err := e.followUp(ctx, msg, push, early)
		if err == nil && e.followedHook != nil {
			e.followedHook()
		}
		return lt, err
	}
	// Launched before admission: a drain that begins after this waits for
	// the task.
	l, err := e.beginLaunch()
	if err != nil {
		return nil, err
	}
	defer l.abort()
	// Admission before the task exists: a request the service sheds leaves
	// nothing behind.
	var ticket *admit.Ticket
	var pending *pendingRun // to the queue replicas share (queue.go)
	if sq, ok := e.sharedQueue(); ok {
		ticket, pending, err = e.admitShared(ctx, sq, params)
	} else {
		ticket, err = e.admit(ctx, params)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if !l.started && ticket != nil {
			ticket.Done()
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
		Metadata:  admissionMetadata(params.Metadata, ticket),
	}
	if pending != nil {
		task.Metadata = queuedMetadata(params.Metadata, pending)
	}
	execCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	owner := callerName(ctx)
	lt := &liveTask{task: task, owner: owner, done: make(chan struct{}), cancelExec: cancel, ticket: ticket, push: push != nil, pushKnown: true}
	// The task is live before it is stored: a second send of the same
	// message that arrives once Create has returned finds it running.
	l.register(lt)
	if err := e.store.Create(ctx, task, owner); err != nil {
		e.forget(task.ID)
		cancel(nil)
		var dup *DuplicateError
		if errors.As(err, &dup) {
			// The caller sent this message before: its task, and nothing
			// starts.
			return e.existing(ctx, dup.Existing)
		}
		return nil, err
	}
	if push != nil {
		if _, err := e.store.SetPush(ctx, task.ID, *push); err != nil {
			e.abandon(ctx, lt, "the push notification config was not stored: "+err.Error())
			cancel(nil)
			return nil, err
		}
	}
	if early != nil || (params.Config != nil && params.Config.Blocking != nil && !*params.Config.Blocking) {
		// A send answered before its task ends is answered with the task
		// once its creation is durable (Syncer): synced before the run
		// starts, so that a creation the store lost (a commit that failed)
		// is answered with the store's unavailability and nothing has
		// started that a retry would run again. A blocking send's run
		// starts at once: the task's end commits its creation with it (one
		// transaction on SQLite), and a creation lost meanwhile stops the
		// run (persisted, syncLocked).
		lt.mu.Lock()
		err := e.syncLocked(ctx, lt)
		lt.mu.Unlock()
		if err != nil {
			e.forget(task.ID)
			cancel(nil)
			return nil, err
		}
	}
	if pending != nil {
		defer cancel(nil)
		return e.enqueueShared(ctx, lt, pending)
	}
	reqCtx := &a2asrv.RequestContext{Message: &m, TaskID: task.ID, ContextID: task.ContextID, Metadata: params.Metadata}
	if early != nil {
		lt.mu.Lock()
		if early.answerOnly {
			early.first = lt.task // stored and durable: synced above
		} else {
			early.sub, early.first = lt.subscribeLocked()
		}
		lt.mu.Unlock()
	}
	lt.mu.Lock()
	e.hollowLocked(lt) // the store holds the message now; the run has it in reqCtx
	lt.mu.Unlock()
	l.start(execCtx, cancel, lt, reqCtx, nil)
	return lt, nil
}

// launch is the one path by which the engine starts an executor run: a new
// task's (startWatched), one claimed from the shared queue (claimQueued),
// an orphan queued again or rerun (requeue, rerun). beginLaunch checks
// draining and counts the run for Wait in one step: a drain that began
// before refuses the run (ErrDraining), one that begins after waits for it.
// start registers the task as live (unless register did, earlier) and runs
// its executor; a launch that does not get there is ended with abort.
type launch struct {
	e          *Engine
	registered bool // the task is live (register)
	started    bool // its run started: run ends the count
	aborted    bool // ended without a run
}

// beginLaunch begins a launch, or refuses it with ErrDraining.
func (e *Engine) beginLaunch() (*launch, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.draining {
		return nil, ErrDraining
	}
	e.wg.Add(1)
	return &launch{e: e}, nil
}

// register makes lt live before its run starts.
func (l *launch) register(lt *liveTask) {
	l.e.mu.Lock()
	l.e.live[lt.task.ID] = lt
	l.e.mu.Unlock()
	l.registered = true
}

// start runs execute on lt in the background (run), lt live from now on
// if it was not already; execute nil runs the engine's executor on reqCtx
// (Execute), without a function of its own to allocate.
func (l *launch) start(ctx context.Context, cancel context.CancelCauseFunc, lt *liveTask, reqCtx *a2asrv.RequestContext, execute func(context.Context, queue) error) {
	if !l.registered {
		l.register(lt)
	}
	l.started = true
	l.e.runners.launch(func() { l.e.run(ctx, cancel, lt, reqCtx, execute) })
	if l.e.startedHook != nil {
		l.e.startedHook(lt)
	}
}

// abort ends a launch that did not start: Wait no longer waits for it. It
// does nothing once the run started, or on a second call.
func (l *launch) abort() {
	if l.started || l.aborted {
		return
	}
	l.aborted = true
	l.e.wg.Done()
}

// forget drops a task from the live ones.
func (e *Engine) forget(id a2a.TaskID) {
	e.mu.Lock()
	delete(e.live, id)
	e.mu.Unlock()
}

// existing is the task a duplicate message names: live if it runs here, else
// its stored snapshot, which nothing will change here (finished, or run by
// another process).
func (e *Engine) existing(ctx context.Context, id a2a.TaskID) (*liveTask, error) {
	if lt := e.getLive(id); lt != nil {
		return lt, nil
	}
	t, _, err := e.store.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read task %s: %w", id, err)
	}
	return settled(t), nil
}

// settled wraps a snapshot this engine does not drive as a liveTask that has
// ended: waiting on it returns at once, a stream of it is the snapshot.
func settled(t *a2a.Task) *liveTask {
	lt := &liveTask{task: t, done: make(chan struct{}), settled: true}
	close(lt.done)
	return lt
}

// abandon ends a task that never started: failed (when the store takes it),
// no longer live.
func (e *Engine) abandon(ctx context.Context, lt *liveTask, why string) {
	t := lt.snapshot()
	ev := a2a.NewStatusUpdateEvent(t, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, t, a2a.TextPart{Text: why}))
	ev.Final = true
	if err := e.apply(ctx, lt, ev); err != nil {
		e.log.Warn("task not marked failed", "task_id", string(t.ID), "err", err)
		e.forget(t.ID)
	}
}

// followUp adds a message to a running task: it joins the task's history and
// waits for the executor, which takes it as the task's next turn. A finished
// task takes no more messages (a refinement is a new task, which may name this
// one in referenceTaskIds). A message that joins the task gives early
// (answerOnly) the task's snapshot stored with it: the answer of its
// non-blocking send.
func (e *Engine) followUp(ctx context.Context, msg *a2a.Message, push *PushTarget, early *earlySub) (*liveTask, error) {
	id := msg.TaskID
	lt := e.getLive(id)
	if lt == nil {
		t, _, err := e.store.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if hasMessage(t, msg.ID) {
			return settled(t), nil // sent before: nothing changes
		}
		if sh, remote := e.sharedFor(t); remote {
			if fw, ok := sh.(Forwarder); ok && ctx.Value(forwardedKey{}) == nil && e.runnerKnown(ctx, t) {
				return e.forward(ctx, fw, t, msg, push, early)
			}
			return nil, e.elsewhere(ctx, t)
		}
		return nil, fmt.Errorf("task %s is %s and takes no more messages; send a new message (its referenceTaskIds may name this task): %w", id, t.Status.State, a2a.ErrUnsupportedOperation)
	}
	if lt.cancelExec == nil {
		return nil, fmt.Errorf("task %s is a nested subagent, driven by its parent; it takes no messages: %w", id, a2a.ErrUnsupportedOperation)
	}
	by := e.answerBy()
	if err := e.lockBy(ctx, lt, by); err != nil {
		return nil, err
	}
	defer lt.mu.Unlock()
	cur := lt.task
	if msg.ContextID != "" && msg.ContextID != cur.ContextID {
		return nil, fmt.Errorf("message.contextId %q is not task %s's context %q: %w", msg.ContextID, id, cur.ContextID, a2a.ErrInvalidParams)
	}
	if hasMessage(cur, msg.ID) {
		return lt, nil // sent before: it is in the history already
	}
	if lt.asking.answers != nil {
		return e.answerLocked(ctx, lt, msg, early)
	}
	if lt.closed || cur.Status.State.Terminal() {
		return nil, fmt.Errorf("task %s is finishing and takes no more messages: %w", id, a2a.ErrUnsupportedOperation)
	}
	if len(lt.followUps) >= MaxFollowUps {
		return nil, fmt.Errorf("task %s already has %d follow-up messages waiting: %w", id, MaxFollowUps, a2a.ErrUnsupportedOperation)
	}
	m := *msg
	m.ContextID = cur.ContextID
	if c, ok := e.exec.(FollowUpChecker); ok {
		// A follow-up the next turn cannot carry is refused now, not when
		// that turn fails to start (which would end the task).
		if err := c.CheckFollowUp(id, append(slices.Clip(lt.followUps), &m)); err != nil {
			return nil, err
		}
	}
	next := *cur
	next.History = append(slices.Clip(cur.History), &m)
	if err := e.persistLocked(ctx, lt, &next, by); err != nil {
		return nil, err
	}
	if push != nil {
		if _, err := e.store.SetPush(ctx, id, *push); err != nil {
			return nil, err
		}
		lt.push = true
	}
	lt.task = &next
	lt.followUps = append(lt.followUps, &m)
	if early != nil && early.answerOnly {
		first, err := e.wholeLocked(ctx, lt, &next) // stored and durable: persisted above
		if err != nil {
			return nil, err
		}
		early.first = first
	}
	return lt, nil
}

// hasMessage reports whether a message with this id is in the task's
// history.
func hasMessage(t *a2a.Task, id string) bool {
	return slices.ContainsFunc(t.History, func(m *a2a.Message) bool { return m != nil && m.ID == id })
}

// run drives one executor run (execute), once admission lets it, and makes
// sure its task ends terminal.
func (e *Engine) run(ctx context.Context, cancel context.CancelCauseFunc, lt *liveTask, reqCtx *a2asrv.RequestContext, execute func(context.Context, queue) error) {
	defer e.wg.Done()
	defer cancel(nil)
	if lt.ticket != nil {
		// Done after the terminal event: the slot is free once the task is.
		defer lt.ticket.Done()
		if !e.awaitSlot(ctx, lt, reqCtx) {
			return
		}
	}
	var err error
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("executor panic: %v", r)
			e.log.Error("executor panicked", "task_id", reqCtx.TaskID, "panic", r, "stack", string(debug.Stack()))
		}
		if lt.snapshot().Status.State.Terminal() || lt.fenced.Load() {
			return // a task taken over is its new runner's to end
		}
		text := "the executor ended without a final state"
		if err != nil {
			text = "the executor failed: " + err.Error()
		}
		e.log.Error("forcing task to failed", "task_id", reqCtx.TaskID, "err", err)
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: text}))
		ev.Final = true
		if fm, ok := e.exec.(FailureMetadata); ok {
			ev.Metadata = fm.FailureMetadata()
		}
		if err := e.apply(ctx, lt, ev); err != nil && !errors.Is(err, errTaskFinished) {
			// The store is gone: the task is no longer run here. Its end is
			// stored once the store is back (endLater); if this process
			// goes first, the next start on this store resolves it.
			lt.end()
			e.forget(reqCtx.TaskID)
			lt.mu.Lock()
			lost := lt.lost != nil // nothing of it is stored: nothing to end
			lt.mu.Unlock()
			next, aerr := Apply(lt.snapshot(), ev)
			if aerr != nil || lost || !errors.Is(err, ErrStoreUnavailable) {
				e.log.Error("task left unfinished in the store", "task_id", reqCtx.TaskID, "err", err)
				return
			}
			e.log.Error("task's end not stored: storing it once the store is back", "task_id", reqCtx.TaskID, "err", err)
			go e.endLater(context.WithoutCancel(ctx), lt, next, ev)
		}
	}()
	q := queue{e: e, lt: lt}
	if execute == nil {
		err = e.exec.Execute(ctx, reqCtx, q.events())
		return
	}
	err = execute(ctx, q)
}

// endLater stores the end of a task that the store was unavailable for
// longer than storeRetry, once the store is back: the task's process lives
// on, so no recovery would resolve it (its lease is renewed, its flock held)
// and it stayed working. It stops at another answer than the store's
// unavailability: another replica took the task over (ErrFenced), the store
// lost it or was closed. The task's webhooks are told of the end (ev) once
// it is stored.
func (e *Engine) endLater(ctx context.Context, lt *liveTask, t *a2a.Task, ev a2a.Event) {
	wait := time.Second
	compacted := false
	for {
		time.Sleep(wait)
		lt.mu.Lock()
		whole, err := e.wholeLocked(ctx, lt, t) // its first message is read back once the store is (hollow.go)
		lt.mu.Unlock()
		if err == nil {
			if t = whole; !compacted {
				t, compacted = e.compact(ctx, t, lt.owner), true
			}
			err = e.putEnd(ctx, t, ev)
		}
		if err == nil {
			e.log.Info("task's end stored: the store is back", "task_id", string(t.ID))
			return
		}
		if !errors.Is(err, ErrStoreUnavailable) {
			e.log.Error("task left unfinished in the store", "task_id", string(t.ID), "err", err)
			return
		}
		wait = min(2*wait, 5*time.Second)
	}
}
