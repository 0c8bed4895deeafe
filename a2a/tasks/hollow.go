package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/a2aproject/a2a-go/a2a"
)

// A running task's large first message is held by a durable store, not by
// the engine.
//
// Over a Durable store, once a new task is created (the store holds its
// first message), the live snapshot's first message keeps its id, role and
// metadata but each text part over HollowAbove bytes is emptied: while the
// task runs, the engine holds none of that text (the executor gets the
// whole message in its RequestContext, and may let it go once its run has
// what it needs: StoredMessage reads it back). A write of a newer snapshot
// of the running task leaves the message to the store too: a MessageKeeper
// keeps the bytes it holds in place (PutKeeping), and another store is
// handed the snapshot with the message read back. Whatever the engine shows
// of the task (the answer of a send or tasks/get, the first snapshot of a
// stream, a push notification) and the end it stores are the snapshot with
// that message read back from the store (wholeLocked: only its text, from
// a MessageKeeper), and a task that ends holds its whole message again:
// what callers see does not change. Over MemoryStore the store is the
// memory: the live snapshot keeps the message.

// HollowAbove is the size over which a text part of a running task's first
// message is left to its durable store (above).
const HollowAbove = 16 << 10

// StoredMessage is implemented by the event queue the Engine hands an
// executor when its store is Durable, and only then: the task's first
// message is kept by the store, and FirstMessage reads it back whole (the
// message the run's RequestContext carried), for an executor that let its
// copy go.
type StoredMessage interface {
	FirstMessage(ctx context.Context) (*a2a.Message, error)
}

var _ StoredMessage = retainingQueue{}

// FirstMessage implements StoredMessage.
func (q retainingQueue) FirstMessage(ctx context.Context) (*a2a.Message, error) {
	return q.e.firstMessage(ctx, q.lt)
}

// FirstMessage reads task id's first message back whole: from the live
// task's snapshot, or from its store where the engine left its text there
// (a task OpenTask registered, while it runs), or from the stored task once
// it is no longer live here.
func (e *Engine) FirstMessage(ctx context.Context, id a2a.TaskID) (*a2a.Message, error) {
	if lt := e.getLive(id); lt != nil {
		return e.firstMessage(ctx, lt)
	}
	t, _, err := e.store.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read task %s's first message: %w", id, err)
	}
	if len(t.History) == 0 {
		return nil, fmt.Errorf("read task %s's first message: it has none", id)
	}
	return t.History[0], nil
}

// firstMessage is lt's first message, read back from the store if the
// engine left it there.
func (e *Engine) firstMessage(ctx context.Context, lt *liveTask) (*a2a.Message, error) {
	lt.mu.Lock()
	t := lt.task
	if lt.hollow == nil {
		lt.mu.Unlock()
		if len(t.History) == 0 {
			return nil, fmt.Errorf("read task %s's first message: it has none", t.ID)
		}
		return t.History[0], nil
	}
	hollow := lt.hollow
	lt.mu.Unlock()
	m, err := e.storedMessage(ctx, t.ID, hollow)
	if err != nil {
		return nil, fmt.Errorf("read task %s's first message: %w", t.ID, err)
	}
	return m, nil
}

// storedMessage reads back the message hollow stands for from the task's
// stored snapshot: only its text, when the store keeps it (MessageKeeper),
// else the whole task read and decoded.
func (e *Engine) storedMessage(ctx context.Context, id a2a.TaskID, hollow *a2a.Message) (*a2a.Message, error) {
	if k, ok := e.store.(MessageKeeper); ok {
		m, err := k.KeptMessage(ctx, id, hollow)
		if !errors.Is(err, ErrNotKept) {
			return m, err
		}
	}
	stored, _, err := e.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if i := messageIndex(stored.History, hollow.ID); i >= 0 {
		return stored.History[i], nil
	}
	return nil, fmt.Errorf("the stored task has no message %s", hollow.ID)
}

// hollowLocked leaves lt's first message to the store when the store is
// Durable and the message has a text part over HollowAbove; lt.mu is held.
func (e *Engine) hollowLocked(lt *liveTask) {
	if _, ok := e.store.(Durable); !ok || lt.hollow != nil || len(lt.task.History) == 0 {
		return
	}
	m := lt.task.History[0]
	if m == nil || m.ID == "" {
		return
	}
	var parts a2a.ContentParts
	for i, p := range m.Parts {
		if tp, ok := p.(a2a.TextPart); ok && len(tp.Text) > HollowAbove {
			if parts == nil {
				parts = slices.Clone(m.Parts)
			}
			tp.Text = ""
			parts[i] = tp
		}
	}
	if parts == nil {
		return
	}
	h := *m
	h.Parts = parts
	next := *lt.task
	next.History = slices.Clone(lt.task.History)
	next.History[0] = &h
	lt.task, lt.hollow = &next, &h
}

// wholeLocked returns t, a snapshot of lt, with the message hollowLocked
// left to the store read back from it; t itself when t holds no hollow
// message. lt.mu is held.
func (e *Engine) wholeLocked(ctx context.Context, lt *liveTask, t *a2a.Task) (*a2a.Task, error) {
	if lt.hollow == nil {
		return t, nil
	}
	i := slices.Index(t.History, lt.hollow)
	if i < 0 {
		return t, nil
	}
	m, err := e.storedMessage(context.WithoutCancel(ctx), t.ID, lt.hollow)
	if err != nil {
		return nil, fmt.Errorf("read task %s's first message back: %w", t.ID, err)
	}
	out := *t
	out.History = slices.Clone(t.History)
	out.History[i] = m
	return &out, nil
}

// wholeRetrying is wholeLocked for a write of the task: its read waits for
// an unavailable store as the write would (putRetrying). lt.mu is held.
func (e *Engine) wholeRetrying(ctx context.Context, lt *liveTask, t *a2a.Task) (*a2a.Task, error) {
	whole := t
	err := e.putRetrying(ctx, lt, t, func(ctx context.Context, t *a2a.Task) error {
		var err error
		whole, err = e.wholeLocked(ctx, lt, t)
		return err
	}, e.retryBy())
	return whole, err
}

// wholeTaskLocked is lt's snapshot whole (wholeLocked); lt.mu is held.
func (e *Engine) wholeTaskLocked(ctx context.Context, lt *liveTask) (*a2a.Task, error) {
	return e.wholeLocked(ctx, lt, lt.task)
}

// messageIndex is the index of the message with this id in h, or -1.
func messageIndex(h []*a2a.Message, id string) int {
	return slices.IndexFunc(h, func(m *a2a.Message) bool { return m != nil && m.ID == id })
}
