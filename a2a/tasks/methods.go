package tasks

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
)

// OnSendMessage handles message/send: it starts a task and, unless the client
// asked not to block, waits for it to end.
func (e *Engine) OnSendMessage(ctx context.Context, params *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	hist := historyLength(params)
	if params.Config != nil && params.Config.Blocking != nil && !*params.Config.Blocking {
		// A new task that runs here is answered with its snapshot synced
		// before its run started, a follow-up with the snapshot stored with
		// it: once the run has started (the follow-up is queued), its send
		// is answered with the task, whatever the run's later writes meet
		// (a full disk), since a retry of a send answered with an error
		// would run the work again.
		early := earlySub{answerOnly: true}
		lt, err := e.startWatched(ctx, params, &early)
		if err != nil {
			return nil, err
		}
		if early.first != nil {
			return trimHistory(early.first, hist), nil
		}
		t, err := e.seen(ctx, lt, e.answerBy()) // a duplicate, a queued task
		if err != nil {
			return nil, err
		}
		return trimHistory(t, hist), nil
	}
	lt, err := e.start(ctx, params)
	if err != nil {
		return nil, err
	}
	var timeout <-chan time.Time
	if e.sendWait > 0 {
		t := time.NewTimer(e.sendWait)
		defer t.Stop()
		timeout = t.C
	}
	if lt.settled {
		// A duplicate of a message whose task another replica runs.
		if sh, ok := e.sharedFor(lt.snapshot()); ok {
			t, err := e.waitRemote(ctx, sh, lt.snapshot().ID, timeout)
			if err != nil {
				return nil, err
			}
			return trimHistory(t, hist), nil
		}
	}
	// The task's end or interruption (input-required), unless its writes
	// wait for an unavailable store for the store wait.
	if err := e.waitStop(ctx, lt, timeout, true); err != nil {
		return nil, err
	}
	t, err := e.seen(ctx, lt, e.answerBy())
	if err != nil {
		return nil, err
	}
	return trimHistory(t, hist), nil
}

// OnSendMessageStream handles message/stream: the task first, then every event
// until the terminal one.
func (e *Engine) OnSendMessageStream(ctx context.Context, params *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		var early earlySub
		lt, err := e.startWatched(ctx, params, &early)
		if err != nil {
			yield(nil, err)
			return
		}
		if early.sub == nil { // a follow-up, a duplicate, a queued task
			e.stream(ctx, lt, yield)
			return
		}
		// What is shown is stored and durable: startWatched synced it.
		e.streamFrom(ctx, lt, early.sub, early.first, yield)
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
			if sh, ok := e.sharedFor(t); ok {
				e.followRemote(ctx, sh, t.ID, yield) // another replica runs it
				return
			}
			yield(t, nil)
			return
		}
		e.stream(ctx, lt, yield)
	}
}

func (e *Engine) stream(ctx context.Context, lt *liveTask, yield func(a2a.Event, error) bool) {
	if lt.settled {
		if sh, ok := e.sharedFor(lt.snapshot()); ok {
			e.followRemote(ctx, sh, lt.snapshot().ID, yield)
			return
		}
		yield(lt.snapshot(), nil)
		return
	}
	sub, first, err := e.subscribe(ctx, lt)
	if err != nil {
		yield(nil, err)
		return
	}
	e.streamFrom(ctx, lt, sub, first, yield)
}

// streamFrom yields first, then sub's events until the task ends.
func (e *Engine) streamFrom(ctx context.Context, lt *liveTask, sub *subscriber, first *a2a.Task, yield func(a2a.Event, error) bool) {
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
	return trimHistory(e.sharedPosition(ctx, e.withPosition(t)), q.HistoryLength), nil
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
		if sh, ok := e.sharedFor(t); ok {
			return e.cancelRemote(ctx, sh, t) // another replica runs it
		}
		if err := e.runsElsewhere(ctx, t); err != nil {
			return nil, err
		}
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
	if err := e.waitEnd(ctx, lt, nil); err != nil {
		return nil, err
	}
	return lt.snapshot(), nil
}

// runsElsewhere is the cancel error for an unfinished task t that is not
// live here, in a store that can say who runs it: another process that shares
// the store (it alone can cancel it), or a runner that is gone (the next
// start on the store resolves it). Nil when the store cannot say.
func (e *Engine) runsElsewhere(ctx context.Context, t *a2a.Task) error {
	el, ok := e.store.(Elsewhere)
	if !ok || t.Status.State.Terminal() {
		return nil
	}
	runner, alive, err := el.RunnerOf(ctx, t.ID)
	switch {
	case err != nil || runner == "":
		return nil
	case alive:
		return fmt.Errorf("task %s is %s in another agentd process sharing this task store (instance %s), not in this one: only the process that accepted it can cancel it: %w", t.ID, t.Status.State, runner, a2a.ErrTaskNotCancelable)
	default:
		return fmt.Errorf("task %s is %s, but the agentd process that ran it (instance %s) is gone: the next start on this task store resolves it: %w", t.ID, t.Status.State, runner, a2a.ErrTaskNotCancelable)
	}
}

// errCancelRequested is the cause an executor's context carries after
// tasks/cancel. Its text reaches callers: an executor reports the cause in the
// cancelled task's status message.
var errCancelRequested = errors.New("at the client's request")

// CancelRequested reports whether cause, an executor's context's, is a
// tasks/cancel's (not the service's stop).
func CancelRequested(cause error) bool { return errors.Is(cause, errCancelRequested) }

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

// pushCall checks a push-config call on task id: push notifications are
// offered, the id is given (field is its name in the params), and the caller
// may see the task.
func (e *Engine) pushCall(ctx context.Context, id a2a.TaskID, field string) error {
	if e.pusher == nil {
		return a2a.ErrPushNotificationNotSupported
	}
	if id == "" {
		return fmt.Errorf("%s is required: %w", field, a2a.ErrInvalidParams)
	}
	_, err := e.visible(ctx, id)
	return err
}

// DefaultPushConfigID is the id of a push config registered through A2A 0.3
// without one.
const DefaultPushConfigID = "default"

// OnSetTaskPushConfig registers a webhook for a task (checked against the
// address policy) and returns it with its id.
func (e *Engine) OnSetTaskPushConfig(ctx context.Context, params *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	if params == nil {
		params = &a2a.TaskPushConfig{}
	}
	if err := e.pushCall(ctx, params.TaskID, "taskId"); err != nil {
		return nil, err
	}
	t, err := e.pushTarget(ctx, &params.Config)
	if err != nil {
		return nil, err
	}
	stored, err := e.store.SetPush(ctx, params.TaskID, t)
	if err != nil {
		return nil, err
	}
	if lt := e.getLive(params.TaskID); lt != nil {
		lt.mu.Lock()
		lt.push = true
		lt.mu.Unlock()
	}
	return &a2a.TaskPushConfig{TaskID: params.TaskID, Config: stored.Config}, nil
}

// OnGetTaskPushConfig returns a task's webhook; without a config id, the most
// recently registered one.
func (e *Engine) OnGetTaskPushConfig(ctx context.Context, params *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	if params == nil {
		params = &a2a.GetTaskPushConfigParams{}
	}
	if err := e.pushCall(ctx, params.TaskID, "id"); err != nil {
		return nil, err
	}
	t, err := e.store.GetPush(ctx, params.TaskID, params.ConfigID)
	if err != nil {
		return nil, err
	}
	return &a2a.TaskPushConfig{TaskID: params.TaskID, Config: t.Config}, nil
}

// OnListTaskPushConfig returns a task's webhooks (an empty list when none).
func (e *Engine) OnListTaskPushConfig(ctx context.Context, params *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	if params == nil {
		params = &a2a.ListTaskPushConfigParams{}
	}
	if err := e.pushCall(ctx, params.TaskID, "id"); err != nil {
		return nil, err
	}
	targets, err := e.store.ListPush(ctx, params.TaskID)
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
	if params == nil {
		params = &a2a.DeleteTaskPushConfigParams{}
	}
	if err := e.pushCall(ctx, params.TaskID, "id"); err != nil {
		return err
	}
	return e.store.DeletePush(ctx, params.TaskID, params.ConfigID)
}

// ListTasks returns one page of the tasks the caller created (every task for
// an operator), most recently updated first (A2A 1.0 ListTasks; 0.3 has no
// such method). q.Owner and q.AnyOwner are ignored: the caller decides them.
func (e *Engine) ListTasks(ctx context.Context, q ListQuery) (ListPage, error) {
	switch size := q.PageSize; {
	case size == 0:
		q.PageSize = DefaultPageSize
	case size < 0 || size > MaxPageSize:
		return ListPage{}, fmt.Errorf("pageSize must be in 1..%d: %w", MaxPageSize, a2a.ErrInvalidParams)
	}
	if q.HistoryLength != nil && *q.HistoryLength < 0 {
		return ListPage{}, fmt.Errorf("historyLength must not be negative: %w", a2a.ErrInvalidParams)
	}
	// An operator, who may read every task, lists every task: the service's
	// own (a standing trigger's runs, created by no caller) among them.
	q.Owner, q.AnyOwner = callerName(ctx), isOperator(ctx)
	// What is listed is stored first (lazy.go).
	if err := e.flushLive(ctx); err != nil {
		return ListPage{}, err
	}
	page, err := e.store.List(ctx, q)
	if err != nil || e.admission == nil {
		return page, err
	}
	cloned := false
	for i, t := range page.Tasks {
		if p := e.withPosition(t); p != t {
			if !cloned {
				page.Tasks, cloned = slices.Clone(page.Tasks), true // the store's slice stays as it was
			}
			page.Tasks[i] = p
		}
	}
	// A task in the shared queue at its current place (as tasks/get).
	page.Tasks = e.sharedPositions(ctx, page.Tasks)
	return page, nil
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

// validateSendParams checks a message before a task exists for it: a message
// with an id, a role, and at least one well-formed part.
func validateSendParams(p *a2a.MessageSendParams) error {
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
