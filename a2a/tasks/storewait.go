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
// (putRetrying), and the task's turns into and out of an interrupted state
// (noteStateLocked), for the callers that wait for the task's end or
// interruption (waitStop). Its zero value is no write waiting, the task
// not interrupted; it is safe for concurrent use.
type stall struct {
	mu    sync.Mutex    // guards since, wake, turns
	since time.Time     // when the waiting write first failed; zero: none waits
	wake  chan struct{} // closed when a write begins to wait or the task is interrupted; nil until a waiter needs one
	turns uint64        // the task's turns into and out of an interrupted state: odd while it is in one
}

// wakeLocked wakes the waiters (state's channel). s.mu is held.
func (s *stall) wakeLocked() {
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
}

// begin records that a write waits for the store, from now if none did.
func (s *stall) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.since.IsZero() {
		return
	}
	s.since = time.Now()
	s.wakeLocked()
}

// end records that no write waits for the store.
func (s *stall) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.since = time.Time{}
}

// turn records that the task went into or out of an interrupted state; the
// waiters are woken when it goes in.
func (s *stall) turn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns++
	if s.turns%2 == 1 {
		s.wakeLocked()
	}
}

// state returns since when a write has waited (zero for none), the task's
// turns into and out of an interrupted state so far, and a channel closed
// when a write begins to wait or the task is interrupted.
func (s *stall) state() (time.Time, uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.since, s.turns, s.wake
}

// waitEnd waits until lt ends, timeout fires or ctx ends; it answers
// ErrStoreUnavailable once a write of lt has waited for the store for the
// store wait (the task cannot move on meanwhile).
func (e *Engine) waitEnd(ctx context.Context, lt *liveTask, timeout <-chan time.Time) error {
	return e.waitStop(ctx, lt, timeout, false)
}

// waitStop is waitEnd that, with atInterrupt, also returns once the task is
// in an interrupted state (input-required: answer.go), or has been since
// the wait began.
func (e *Engine) waitStop(ctx context.Context, lt *liveTask, timeout <-chan time.Time, atInterrupt bool) error {
	var turns uint64
	for first := true; ; first = false {
		select {
		case <-lt.done: // ended: nothing to wait for, nor a channel to make
			return nil
		default:
		}
		since, n, wake := lt.stall.state()
		if first {
			turns = n
		}
		if atInterrupt && (n%2 == 1 || n != turns) {
			return nil
		}
		var giveUp <-chan time.Time
		var t *time.Timer
		if !since.IsZero() {
			t = time.NewTimer(time.Until(since.Add(e.storeWait)))
			giveUp = t.C
		}
		select {
		case <-lt.done:
		case <-timeout:
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
			if t != nil {
				t.Stop()
			}
			continue
		case <-giveUp:
			if s, _, _ := lt.stall.state(); !s.IsZero() && time.Since(s) >= e.storeWait {
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
