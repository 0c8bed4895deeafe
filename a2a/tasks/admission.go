package tasks

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
)

// WithAdmission puts every new task behind the service's admission control:
// a task is created submitted and its executor runs only once c gives it a
// slot; a task c sheds is not created, and the send fails with the
// *admit.ShedError (the front answers 429 with its retry-after hint).
// policy caps the priority each caller may ask for. A queued task that is
// cancelled (tasks/cancel), or still queued when the engine drains, ends
// canceled without having run. Follow-up messages to a running task are not
// admitted again: they are turns of a run that holds its slot.
func WithAdmission(c *admit.Controller, policy admit.Policy) EngineOption {
	return func(e *Engine) { e.admission, e.policy = c, policy }
}

// errDrained is the cause of a queued task the drain cancelled.
var errDrained = fmt.Errorf("the service drained before the task left the admission queue: %w", ErrDraining)

// admit asks the admission control for a run for this request: nil without
// admission control.
func (e *Engine) admit(ctx context.Context, params *a2a.MessageSendParams) (*admit.Ticket, error) {
	if e.admission == nil {
		return nil, nil
	}
	asked, err := askedPriority(params)
	if err != nil {
		return nil, err
	}
	name := callerName(ctx)
	return e.admission.EnqueueMessage(name, e.policy.Effective(name, isOperator(ctx), asked), messageBytes(params.Message))
}

// messageBytes is the size of a message's content, what its run's child will
// hold: its text, its files' bytes and its data parts encoded.
func messageBytes(m *a2a.Message) int64 {
	if m == nil {
		return 0
	}
	var n int64
	for _, p := range m.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			n += int64(len(p.Text))
		case a2a.FilePart:
			if fb, ok := p.File.(a2a.FileBytes); ok {
				n += int64(len(fb.Bytes))
			}
		case a2a.DataPart:
			if b, err := json.Marshal(p.Data); err == nil {
				n += int64(len(b))
			}
		}
	}
	return n
}

// askedPriority reads api.MetaPriority from the message's metadata, else the
// request's: a string naming a priority, or nothing.
func askedPriority(params *a2a.MessageSendParams) (admit.Priority, error) {
	for _, md := range []map[string]any{params.Message.Metadata, params.Metadata} {
		v, ok := md[api.MetaPriority]
		if !ok {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return 0, fmt.Errorf("metadata %s must be a string (low, normal or high): %w", api.MetaPriority, a2a.ErrInvalidParams)
		}
		p, err := admit.ParsePriority(s)
		if err != nil {
			return 0, fmt.Errorf("metadata %s: %w: %w", api.MetaPriority, err, a2a.ErrInvalidParams)
		}
		return p, nil
	}
	return 0, nil
}

// admissionMetadata is the metadata of a new task's first snapshot: the
// request's, with, when the task waits in the queue, the priority it waits
// at and its position. A task admitted at once gets nothing added.
func admissionMetadata(md map[string]any, t *admit.Ticket) map[string]any {
	if t == nil {
		return md
	}
	pos := t.Position()
	if pos == 0 {
		return md
	}
	out := make(map[string]any, len(md)+2)
	for k, v := range md {
		out[k] = v
	}
	out[api.MetaPriority] = t.Priority().String()
	out[api.MetaQueuePosition] = pos
	return out
}

// awaitSlot holds a new task until admission gives it a slot. It reports
// false when the task ended instead (cancelled or drained while queued): its
// canceled status is written, nothing ran.
func (e *Engine) awaitSlot(ctx context.Context, lt *liveTask, reqCtx *a2asrv.RequestContext) bool {
	t := lt.ticket
	var why error
	select {
	case <-t.Ready():
	case <-ctx.Done():
		why = context.Cause(ctx)
	case <-e.admission.Closed():
		why = errDrained
	}
	if why != nil && t.Cancel() {
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: "cancelled while queued for admission, before it ran: " + why.Error()}))
		ev.Final = true
		ev.Metadata = map[string]any{api.MetaQueuePosition: 0}
		if err := e.apply(ctx, lt, ev); err != nil {
			e.log.Warn("queued task not closed", "task_id", reqCtx.TaskID, "err", err)
		}
		return false
	}
	// It started, maybe while being cancelled (the executor's ctx says so).
	// Out of the queue, it no longer has a position (nothing to drop for a
	// task admitted at once).
	<-t.Ready()
	e.leftQueue(ctx, lt)
	return true
}

// leftQueue drops the queue position from the snapshot of a task that was
// queued and has started.
func (e *Engine) leftQueue(ctx context.Context, lt *liveTask) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	snap := lt.task
	if _, ok := snap.Metadata[api.MetaQueuePosition]; !ok || snap.Status.State.Terminal() {
		return
	}
	next := *snap
	next.Metadata = make(map[string]any, len(snap.Metadata))
	for k, v := range snap.Metadata {
		if k != api.MetaQueuePosition {
			next.Metadata[k] = v
		}
	}
	if err := e.persistLocked(context.WithoutCancel(ctx), lt, &next, e.retryBy()); err != nil {
		e.log.Warn("queue position not cleared", "task_id", snap.ID, "err", err)
		return
	}
	lt.task = &next
}

// withPosition returns t with its current queue position, if it is a live
// task waiting in the admission queue; else t itself.
func (e *Engine) withPosition(t *a2a.Task) *a2a.Task {
	if e.admission == nil || t.Status.State != a2a.TaskStateSubmitted {
		return t
	}
	lt := e.getLive(t.ID)
	if lt == nil || lt.ticket == nil {
		return t
	}
	pos := lt.ticket.Position()
	if pos == 0 {
		return t
	}
	if cur, ok := t.Metadata[api.MetaQueuePosition].(int); ok && cur == pos {
		return t
	}
	c := *t
	c.Metadata = make(map[string]any, len(t.Metadata))
	for k, v := range t.Metadata {
		c.Metadata[k] = v
	}
	c.Metadata[api.MetaQueuePosition] = pos
	return &c
}
