package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// Writes of a durable store. Every state change that anyone can see is
// stored before they see it: the first snapshot (a send is answered with
// it), the terminal one, every event a subscriber or a webhook receives, and
// any snapshot a read returns (tasks/get, a stream's first snapshot, a send's
// answer, ListTasks). A change no one can see yet (a running task's working
// status and artifacts, while nobody watches it) is written within the
// engine's write delay, or as soon as someone looks, whichever comes first,
// and a later change that is written supersedes it: a task that ends within
// the delay costs two writes (its creation and its end) instead of one per
// event. A process that dies meanwhile loses nothing anyone was told: the
// task is an orphan either way, resolved by Recover.

// DefaultWriteDelay is how long an unseen change of a running task waits, by
// default with a durable store, before it is written anyway.
const DefaultWriteDelay = 50 * time.Millisecond

// DefaultSharedWriteDelay is DefaultWriteDelay for a Shared store, which
// other replicas read at any time without this engine knowing: their reads
// lag a change by at most this much more than a write's own time, and a task
// that ends within it (an instant agent's) still costs two writes.
const DefaultSharedWriteDelay = time.Millisecond

// WithWriteDelay sets the write delay of unseen changes (see DefaultWriteDelay;
// 0 writes every change at once). It applies to durable stores only: a
// memory store's writes cost nothing.
func WithWriteDelay(d time.Duration) EngineOption {
	return func(e *Engine) { e.writeDelay, e.writeDelaySet = d, true }
}

// WithEagerRetain writes each retained payload at once instead of with the
// task's next write: what the rerun recovery policy needs, so that a task
// lost right after its start can run again. Without it a task lost within
// the write delay of its start has no payload yet, and fails.
func WithEagerRetain() EngineOption {
	return func(e *Engine) { e.eagerRetain = true }
}

// servePushes marks the live tasks that got a webhook through another
// process, until the store closes the channel. It never waits for a task's
// lock: a task's lock may be held for a write.
func (e *Engine) servePushes(pw PushWatcher) {
	for id := range pw.PushRegistered() {
		if id != "" {
			if lt := e.getLive(id); lt != nil {
				lt.announced.Store(true)
			}
			continue
		}
		e.mu.Lock()
		for _, lt := range e.live {
			lt.pushStale.Store(true)
		}
		e.mu.Unlock()
	}
}

// pushed reports whether an event of lt goes to webhooks: a push config was
// registered through this engine, or, with a Shared store, through any.
// With a PushWatcher store whose ends are journaled (EndJournal), ask
// reports instead that the terminal write is to tell (PutEnd); lt.mu is held.
func (e *Engine) pushed(ctx context.Context, lt *liveTask, id a2a.TaskID, final bool) (push, ask bool) {
	if e.pusher == nil {
		return false, false
	}
	if lt.push || lt.announced.Load() {
		lt.push = true
		return true, false
	}
	if _, ok := e.store.(Shared); !ok {
		return false, false
	}
	if _, ok := e.store.(PushWatcher); ok {
		// Another process's registration is announced (servePushes); the
		// store is read only for a task this engine did not create (its
		// webhooks may predate its coming here) and after a lost
		// announcement.
		if final {
			if e.ends != nil {
				return false, true
			}
			has, _ := e.hasPush(ctx, id)
			return has, false
		}
		if lt.pushKnown && !lt.pushStale.Swap(false) {
			return false, false
		}
		has, err := e.hasPush(ctx, id)
		if err == nil {
			lt.pushKnown = true
		}
		lt.push = has
		return has, false
	}
	// Another replica may have registered one: looked up at most once per
	// write delay (a registration there takes effect here within it, as an
	// unseen change there is read within it), and at the task's end.
	if !final && time.Since(lt.pushChecked) < e.writeDelay {
		return false, false
	}
	has, _ := e.hasPush(ctx, id)
	lt.pushChecked = time.Now()
	lt.push = has
	return has, false
}

// hasPush reads whether a task has webhooks.
func (e *Engine) hasPush(ctx context.Context, id a2a.TaskID) (bool, error) {
	if h, ok := e.store.(pushChecker); ok {
		return h.HasPush(ctx, id)
	}
	targets, err := e.store.ListPush(ctx, id)
	return len(targets) > 0, err
}

// persistLocked stores next (with a payload still waiting to be retained,
// unless the task has ended), retrying until deadline while the store is
// unavailable; lt.mu is held.
func (e *Engine) persistLocked(ctx context.Context, lt *liveTask, next *a2a.Task, deadline time.Time) error {
	if lt.payload != nil && !next.Status.State.Terminal() {
		if d, ok := e.store.(Durable); ok {
			if err := d.Retain(ctx, next.ID, lt.payload); err != nil {
				return e.persisted(lt, err)
			}
		}
	}
	put := e.store.Put
	if lt.hollow != nil {
		put = func(ctx context.Context, t *a2a.Task) error {
			// The store's copy of the first message (hollow.go): kept by
			// the store as it is, or read back.
			if k, ok := e.store.(MessageKeeper); ok && len(t.History) > 0 && t.History[0] == lt.hollow {
				if err := k.PutKeeping(ctx, t); !errors.Is(err, ErrNotKept) {
					return err
				}
			}
			w, err := e.wholeLocked(ctx, lt, t)
			if err != nil {
				return err
			}
			return e.store.Put(ctx, w)
		}
	}
	return e.persisted(lt, e.putRetrying(ctx, lt, next, put, deadline))
}

// persistEndLocked stores a terminal snapshot with its notification
// journaled (EndJournal), and returns the journal's entry, 0 when the task
// has no webhooks; lt.mu is held.
func (e *Engine) persistEndLocked(ctx context.Context, lt *liveTask, next *a2a.Task) (int64, error) {
	var seq int64
	err := e.putRetrying(ctx, lt, next, func(ctx context.Context, t *a2a.Task) error {
		var err error
		seq, err = e.ends.PutEnd(ctx, t)
		return err
	}, e.retryBy())
	return seq, e.persisted(lt, err)
}

// persisted records the outcome of a write of lt's snapshot; lt.mu is held.
func (e *Engine) persisted(lt *liveTask, err error) error {
	if err != nil {
		if errors.Is(err, ErrFenced) {
			if lt.fenced.CompareAndSwap(false, true) {
				go e.stopFenced(lt, err) // another replica runs it now (fence.go)
			} else {
				e.log.Info("write of a task taken over refused", "task_id", string(lt.task.ID), "err", err)
			}
		}
		if errors.Is(err, a2a.ErrTaskNotFound) {
			// A task this engine drives that its store does not hold: the
			// store lost its creation (SQLite's staged create whose commit
			// failed, a full disk). Nothing of it is stored, which is not
			// the caller's "no such task".
			err = fmt.Errorf("%w: the task's creation was lost: %v", ErrStoreUnavailable, err)
			lt.lost = err
			if lt.cancelExec != nil {
				lt.cancelExec(err) // its work would be done again by a retry
			}
		}
		return err
	}
	// A write the engine waited for is durable, and so is what the store
	// wrote of the task before it (Syncer).
	lt.payload, lt.dirty, lt.durable = nil, false, true
	return nil
}

// deferLocked leaves next unwritten for now and schedules its write; lt.mu is
// held.
func (e *Engine) deferLocked(lt *liveTask) {
	lt.dirty = true
	e.scheduleLocked(lt)
}

// scheduleLocked schedules the write of lt's unwritten change (or payload)
// within the write delay; lt.mu is held.
func (e *Engine) scheduleLocked(lt *liveTask) {
	if lt.flushing {
		return
	}
	lt.flushing = true
	time.AfterFunc(e.writeDelay, func() { e.flush(lt) })
}

// flush writes a task's unwritten change, if it still has one.
func (e *Engine) flush(lt *liveTask) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.flushing = false
	if (!lt.dirty && lt.payload == nil) || lt.task.Status.State.Terminal() {
		return
	}
	if err := e.persistLocked(context.Background(), lt, lt.task, e.retryBy()); err != nil && !errors.Is(err, ErrFenced) {
		e.log.Warn("running task not written: retrying", "task_id", string(lt.task.ID), "err", err)
		if errors.Is(err, ErrStoreUnavailable) {
			lt.flushing = true
			time.AfterFunc(time.Second, func() { e.flush(lt) })
		}
	}
}

// seen returns the task's snapshot once it is stored and durable: what a
// reader may be shown. While the store is unavailable it answers
// ErrStoreUnavailable by deadline.
func (e *Engine) seen(ctx context.Context, lt *liveTask, deadline time.Time) (*a2a.Task, error) {
	if err := e.lockBy(ctx, lt, deadline); err != nil {
		return nil, err
	}
	defer lt.mu.Unlock()
	if lt.lost != nil {
		return nil, lt.lost // no snapshot of it is stored
	}
	if lt.dirty && !lt.task.Status.State.Terminal() {
		if err := e.persistLocked(context.WithoutCancel(ctx), lt, lt.task, deadline); err != nil {
			return nil, err
		}
	}
	if !lt.durable {
		if err := e.syncLocked(ctx, lt); err != nil {
			return nil, err
		}
	}
	return e.wholeTaskLocked(ctx, lt)
}

// syncLocked makes lt's creation, and every write that returned, durable
// (Syncer); lt.mu is held. A creation the store lost (TaskSyncer: a staged
// creation whose commit failed) makes the task lost: no one is told of it,
// and its run is stopped, since nothing of it is stored and a retry of its
// send would run it again.
func (e *Engine) syncLocked(ctx context.Context, lt *liveTask) error {
	if lt.lost != nil {
		return lt.lost
	}
	ctx = context.WithoutCancel(ctx)
	var err error
	switch s := e.store.(type) {
	case TaskSyncer:
		if err = s.SyncTask(ctx, lt.task.ID); err != nil && errors.Is(err, ErrStoreUnavailable) {
			err = fmt.Errorf("%w: the task's creation was lost: %v", ErrStoreUnavailable, err)
			lt.lost = err
			if lt.cancelExec != nil {
				lt.cancelExec(err)
			}
		}
	case Syncer:
		err = s.Sync(ctx)
	}
	if err != nil {
		return err
	}
	lt.durable = true
	return nil
}

// flushLive writes every live task's unwritten change (before a read of the
// store itself: ListTasks).
func (e *Engine) flushLive(ctx context.Context) error {
	e.mu.Lock()
	live := make([]*liveTask, 0, len(e.live))
	for _, lt := range e.live {
		live = append(live, lt)
	}
	e.mu.Unlock()
	by := e.answerBy()
	for _, lt := range live {
		if _, err := e.seen(ctx, lt, by); err != nil {
			return err
		}
	}
	return nil
}
