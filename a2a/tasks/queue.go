package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
)

// QueuedRun is a run waiting in a SharedQueue: its task (stored, submitted)
// and what its executor needs besides the task's first message, which is in
// the task's history. It is a plain value; the zero value names no task.
type QueuedRun struct {
	TaskID   a2a.TaskID
	Owner    string // the caller that created the task ("" anonymous)
	Auth     string // how the caller authenticated (mtls, jwt-svid, token, none)
	Operator bool   // the caller had the operator role
	Priority admit.Priority
	// Request is the request's metadata, JSON.
	Request []byte
}

// QueueFullError is SharedQueue.Enqueue's refusal of a run the queue has no
// room for: Reason is admit.ReasonQueueFull or admit.ReasonCallerQueueFull,
// Queued the runs the queue held.
type QueueFullError struct {
	Reason string
	Queued int
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("tasks: the shared admission queue has no room (%s, %d queued)", e.Reason, e.Queued)
}

// queueRecheck is how often an idle process looks at the shared queue
// without being woken (a lost notification costs at most this).
const queueRecheck = time.Second

// sharedQueue returns the store's shared queue when the engine admits
// through one.
func (e *Engine) sharedQueue() (SharedQueue, bool) {
	if e.admission == nil {
		return nil, false
	}
	sq, ok := e.store.(SharedQueue)
	return sq, ok
}

// pendingRun is a new task that found no free slot here and goes to the
// shared queue once it is stored.
type pendingRun struct {
	sq                  SharedQueue
	run                 QueuedRun
	pos                 int // its position estimate when it was stored
	capacity, perCaller int // the queue's bounds
}

// admitShared is admission through a shared queue: a running ticket when
// this process has a free slot, else the run to queue (or a *admit.ShedError
// when the queue has no room).
func (e *Engine) admitShared(ctx context.Context, sq SharedQueue, params *a2a.MessageSendParams) (*admit.Ticket, *pendingRun, error) {
	asked, err := askedPriority(params)
	if err != nil {
		return nil, nil, err
	}
	name := callerName(ctx)
	prio := e.policy.Effective(name, isOperator(ctx), asked)
	if t := e.admission.TryStart(name, prio); t != nil {
		return t, nil, nil
	}
	all, owners, err := sq.QueueLength(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	capacity, perCaller := e.admission.QueueBounds()
	switch {
	case all >= capacity:
		return nil, nil, e.admission.Shed(admit.ReasonQueueFull, all)
	case owners >= perCaller:
		return nil, nil, e.admission.Shed(admit.ReasonCallerQueueFull, all)
	}
	req, err := json.Marshal(params.Metadata)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the request's metadata: %w", err)
	}
	auth, _ := callerAuth(ctx)
	return nil, &pendingRun{sq: sq, pos: all + 1, capacity: capacity, perCaller: perCaller, run: QueuedRun{Owner: name, Auth: auth, Operator: isOperator(ctx), Priority: prio, Request: req}}, nil
}

// queuedMetadata is the metadata of a task that waits in the shared queue.
func queuedMetadata(md map[string]any, p *pendingRun) map[string]any {
	out := make(map[string]any, len(md)+2)
	for k, v := range md {
		out[k] = v
	}
	out[api.MetaPriority] = p.run.Priority.String()
	out[api.MetaQueuePosition] = p.pos
	return out
}

// enqueueShared hands a stored new task to the shared queue: no process runs
// it until one with room claims it. The returned task is followed through
// the store, as another replica's.
func (e *Engine) enqueueShared(ctx context.Context, lt *liveTask, p *pendingRun) (*liveTask, error) {
	t := lt.snapshot()
	p.run.TaskID = t.ID
	if _, err := p.sq.Enqueue(ctx, p.run, p.capacity, p.perCaller); err != nil {
		var full *QueueFullError
		if errors.As(err, &full) {
			// Other replicas filled the queue meanwhile: shed, and the
			// store deleted the task.
			e.forget(t.ID)
			return nil, e.admission.Shed(full.Reason, full.Queued)
		}
		e.abandon(ctx, lt, "the task was not queued for admission: "+err.Error())
		return nil, err
	}
	e.forget(t.ID)
	e.log.Info("task queued for admission across replicas", "task_id", string(t.ID), "priority", p.run.Priority.String(), "position", p.pos)
	return settled(t), nil
}

// serveQueue claims runs from the shared queue while this process has free
// slots: when a slot frees, when a run is queued anywhere, and every
// queueRecheck. It returns when admission closes (a drain) or the store
// does.
func (e *Engine) serveQueue(sq SharedQueue) {
	tick := time.NewTicker(queueRecheck)
	defer tick.Stop()
	published := 0
	for {
		if b, _ := e.admission.Bounds(); b.MaxRuns != published {
			if err := sq.SetRunSlots(context.Background(), b.MaxRuns); err == nil {
				published = b.MaxRuns
			}
		}
		for e.claimQueued(sq) {
		}
		select {
		case _, ok := <-sq.QueueChanged():
			if !ok {
				return
			}
		case <-e.admission.Freed():
		case <-tick.C:
		case <-e.admission.Closed():
			return
		}
	}
}

// claimQueued claims and starts one run of the shared queue; it reports
// whether it did.
func (e *Engine) claimQueued(sq SharedQueue) bool {
	ctx := context.Background()
	var ticket *admit.Ticket
	run, ok, err := sq.ClaimQueued(ctx, func(r QueuedRun) bool {
		ticket = e.admission.TryStart(r.Owner, r.Priority)
		return ticket != nil
	})
	if err != nil || !ok {
		if ticket != nil {
			ticket.Done()
		}
		if err != nil && !errors.Is(err, ErrStoreUnavailable) {
			e.log.Warn("shared admission queue not read", "err", err)
		}
		return false
	}
	claimed := time.Now()
	t, _, err := e.store.Get(ctx, run.TaskID)
	if err == nil && len(t.History) == 0 {
		err = fmt.Errorf("task %s has no message to run", run.TaskID)
	}
	if err != nil {
		ticket.Done()
		e.log.Error("claimed task not started: it is resolved as this replica's orphan", "task_id", string(run.TaskID), "err", err)
		return true
	}
	var md map[string]any
	if len(run.Request) > 0 {
		if err := json.Unmarshal(run.Request, &md); err != nil {
			e.log.Warn("queued request metadata does not decode", "task_id", string(run.TaskID), "err", err)
		}
	}
	l, err := e.beginLaunch()
	if err != nil {
		// This replica drains: the run is another replica's to start.
		ticket.Done()
		e.handBack(ctx, sq, run)
		return false
	}
	// The executor runs as the caller that sent the message.
	runCtx, cc := a2asrv.WithCallContext(context.Background(), nil)
	cc.User = &queuedCaller{name: run.Owner, auth: run.Auth, operator: run.Operator}
	execCtx, cancel := context.WithCancelCause(runCtx)
	lt := &liveTask{task: t, owner: run.Owner, done: make(chan struct{}), cancelExec: cancel, ticket: ticket}
	reqCtx := &a2asrv.RequestContext{Message: t.History[0], TaskID: t.ID, ContextID: t.ContextID, Metadata: md}
	e.log.Info("task claimed from the shared admission queue", "task_id", string(t.ID), "caller", run.Owner,
		"queued_for", time.Since(StatusTime(t)).String(), "start_took", time.Since(claimed).String())
	l.start(execCtx, cancel, lt, reqCtx, nil)
	return true
}

// handBack puts a run this process claimed from the shared queue, and did
// not start, back in the queue, where another process claims it (as a new
// arrival: behind the runs queued since its claim). One that cannot be put
// back stays this process's, resolved as its orphan (requeue) once it is
// gone.
func (e *Engine) handBack(ctx context.Context, sq SharedQueue, run QueuedRun) {
	if _, err := sq.Enqueue(ctx, run, 0, 0); err != nil {
		e.log.Error("claimed task not handed back to the shared admission queue: it is resolved as this replica's orphan", "task_id", string(run.TaskID), "err", err)
		return
	}
	e.log.Info("claimed task handed back to the shared admission queue: this replica drains", "task_id", string(run.TaskID))
}

// cancelQueued ends a task waiting in the shared queue canceled, whichever
// process queued it: it reports false when the task was not queued (a
// process runs it, which cancelRemote asks).
func (e *Engine) cancelQueued(ctx context.Context, sq SharedQueue, t *a2a.Task) (*a2a.Task, bool, error) {
	if _, queued := t.Metadata[api.MetaQueuePosition]; !queued || t.Status.State != a2a.TaskStateSubmitted {
		return nil, false, nil
	}
	removed, err := sq.RemoveQueued(ctx, t.ID)
	if err != nil || !removed {
		return nil, false, err
	}
	cur, _, err := e.store.Get(ctx, t.ID)
	if err != nil {
		return nil, true, err
	}
	ev := a2a.NewStatusUpdateEvent(cur, a2a.TaskStateCanceled,
		a2a.NewMessageForTask(a2a.MessageRoleAgent, cur, a2a.TextPart{Text: "cancelled while queued for admission, before it ran"}))
	ev.Final = true
	ev.Metadata = map[string]any{api.MetaQueuePosition: 0}
	next, err := Apply(cur, ev)
	if err != nil {
		return nil, true, err
	}
	if err := e.putEnd(ctx, next, ev); err != nil {
		return nil, true, fmt.Errorf("cancel queued task %s: %w", t.ID, err)
	}
	return next, true, nil
}

// sharedPosition returns t with its current place in the shared queue, when
// it waits there.
func (e *Engine) sharedPosition(ctx context.Context, t *a2a.Task) *a2a.Task {
	return e.sharedPositions(ctx, []*a2a.Task{t})[0]
}

// sharedPositions is sharedPosition of every task of ts, in one read of the
// queue; ts is returned when nothing changed, else a copy.
func (e *Engine) sharedPositions(ctx context.Context, ts []*a2a.Task) []*a2a.Task {
	sq, ok := e.sharedQueue()
	if !ok {
		return ts
	}
	var ids []a2a.TaskID
	for _, t := range ts {
		if _, queued := t.Metadata[api.MetaQueuePosition]; queued && t.Status.State == a2a.TaskStateSubmitted && e.getLive(t.ID) == nil {
			ids = append(ids, t.ID)
		}
	}
	if len(ids) == 0 {
		return ts
	}
	pos, err := sq.QueuePositions(ctx, ids)
	if err != nil || len(pos) == 0 {
		return ts
	}
	out := slices.Clone(ts) // the store's slice stays as it was
	for i, t := range out {
		p, ok := pos[t.ID]
		if !ok {
			continue
		}
		c := *t
		c.Metadata = make(map[string]any, len(t.Metadata))
		for k, v := range t.Metadata {
			c.Metadata[k] = v
		}
		c.Metadata[api.MetaQueuePosition] = p
		out[i] = &c
	}
	return out
}

// requeueShared puts a recovered task that was waiting for admission back in
// the shared queue (this process claimed it as an orphan).
func (e *Engine) requeueShared(ctx context.Context, sq SharedQueue, t *a2a.Task, owner string) error {
	prio, _ := admit.ParsePriority(fmt.Sprint(t.Metadata[api.MetaPriority]))
	req, _ := json.Marshal(t.Metadata)
	_, err := sq.Enqueue(ctx, QueuedRun{TaskID: t.ID, Owner: owner, Auth: "recovered", Priority: prio, Request: req}, 0, 0)
	if err != nil {
		return fmt.Errorf("queue task %s again: %w", t.ID, err)
	}
	e.log.Info("queued task queued again in the shared admission queue", "task_id", string(t.ID))
	return nil
}

// queuedCaller is the caller of a run claimed from the shared queue, as the
// process that accepted the message authenticated it.
type queuedCaller struct {
	name, auth string
	operator   bool
}

func (u *queuedCaller) Name() string        { return u.name }
func (u *queuedCaller) Authenticated() bool { return u.name != "" }
func (u *queuedCaller) AuthMethod() string  { return u.auth }
func (u *queuedCaller) Operator() bool      { return u.operator }

// callerAuth returns how the caller of ctx authenticated.
func callerAuth(ctx context.Context) (string, bool) {
	if cc, ok := a2asrv.CallContextFrom(ctx); ok && cc.User != nil {
		if m, ok := cc.User.(interface{ AuthMethod() string }); ok {
			return m.AuthMethod(), true
		}
		if cc.User.Authenticated() {
			return "unknown", true
		}
	}
	return "none", false
}
