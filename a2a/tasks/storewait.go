package tasks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// While the store is unavailable, a caller is answered within the engine's
// store wait: a read, a send or a stream that needs the store, or the end of
// a task whose writes wait for it, answers ErrStoreUnavailable once it has
// waited that long. The runner of a task keeps retrying its own writes for
// the longer storeRetry in the background (nothing is lost); only the
// answer stops waiting.

// DefaultStoreWait is how long, by default, a caller's request waits for an
// unavailable store before it is answered with ErrStoreUnavailable.
const DefaultStoreWait = 5 * time.Second

// WithStoreWait bounds how long a caller's request waits for an unavailable
// store (a write of the task it needs that is retried, the task's lock held
// by such a write, a read of another replica's task) before it is answered
// with ErrStoreUnavailable; d <= 0 is DefaultStoreWait. The task's own
// writes go on being retried for the store retry (WithStoreRetry).
func WithStoreWait(d time.Duration) EngineOption {
	return func(e *Engine) {
		if d <= 0 {
			d = DefaultStoreWait
		}
		e.storeWait = d
	}
}

// unanswered is the answer to a caller whose request waited for the store
// for the store wait.
func (e *Engine) unanswered(what string) error {
	return fmt.Errorf("%w: %s: no answer within %s; retry later", ErrStoreUnavailable, what, e.storeWait)
}

// answerBy is the time by which a caller's request that starts now is
// answered.
func (e *Engine) answerBy() time.Time { return time.Now().Add(e.storeWait) }

// stall records whether a write of a task waits for an unavailable store
// (putRetrying), for the callers that wait for the task's end. Its zero
// value is no write waiting; it is safe for concurrent use.
type stall struct {
	mu    sync.Mutex    // guards since, begun
	since time.Time     // when the waiting write first failed; zero: none waits
	begun chan struct{} // closed when one begins to wait; a new one after it ends
}

// begin records that a write waits for the store, from now if none did.
func (s *stall) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.since.IsZero() {
		return
	}
	s.since = time.Now()
	if s.begun == nil {
		s.begun = make(chan struct{})
	}
	close(s.begun)
}

// end records that no write waits for the store.
func (s *stall) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since.IsZero() {
		return
	}
	s.since, s.begun = time.Time{}, make(chan struct{})
}

// state returns since when a write has waited (zero for none), and a channel
// closed when one begins.
func (s *stall) state() (time.Time, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.begun == nil {
		s.begun = make(chan struct{})
	}
	return s.since, s.begun
}

// waitEnd waits until lt ends, timeout fires or ctx ends; it answers
// ErrStoreUnavailable once a write of lt has waited for the store for the
// store wait (the task cannot move on meanwhile).
func (e *Engine) waitEnd(ctx context.Context, lt *liveTask, timeout <-chan time.Time) error {
	return e.waitStop(ctx, lt, timeout, nil)
}

// waitStop is waitEnd that also returns when interrupted is closed (the
// task is input-required: answer.go).
func (e *Engine) waitStop(ctx context.Context, lt *liveTask, timeout <-chan time.Time, interrupted <-chan struct{}) error {
	for {
		since, begun := lt.stall.state()
		var giveUp <-chan time.Time
		var t *time.Timer
		if !since.IsZero() {
			t = time.NewTimer(time.Until(since.Add(e.storeWait)))
			giveUp, begun = t.C, nil
		}
		select {
		case <-lt.done:
		case <-interrupted:
		case <-timeout:
		case <-ctx.Done():
			return ctx.Err()
		case <-begun:
			continue
		case <-giveUp:
			if s, _ := lt.stall.state(); !s.IsZero() && time.Since(s) >= e.storeWait {
				return e.unanswered("the task's writes wait for the store")
			}
			continue // that write ended; another may wait now
		}
		if t != nil {
			t.Stop()
		}
		return nil
	}
}

// lockBy takes lt.mu for a caller's request, waiting at most until
// deadline: a write of the task that waits for an unavailable store holds
// it (putRetrying), and the caller is answered ErrStoreUnavailable then.
func (e *Engine) lockBy(ctx context.Context, lt *liveTask, deadline time.Time) error {
	if lt.mu.TryLock() {
		return nil
	}
	got, abandon := make(chan struct{}), make(chan struct{})
	go func() {
		lt.mu.Lock()
		select {
		case got <- struct{}{}: // the lock is the caller's now
		case <-abandon:
			lt.mu.Unlock()
		}
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-got:
		return nil
	case <-t.C:
		close(abandon)
		return e.unanswered("the task is being written")
	case <-ctx.Done():
		close(abandon)
		return ctx.Err()
	}
}

// boundedRead runs a read of the store for a caller, answering
// ErrStoreUnavailable at deadline (a read changes nothing: it may be cut
// short).
func boundedRead[T any](e *Engine, ctx context.Context, deadline time.Time, what string, read func(context.Context) (T, error)) (T, error) {
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	v, err := read(rctx)
	if err != nil && ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) && !errors.Is(err, ErrStoreUnavailable) {
		err = fmt.Errorf("%w (%v)", e.unanswered(what), err)
	}
	return v, err
}
