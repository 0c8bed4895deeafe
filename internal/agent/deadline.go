package agent

import (
	"context"
	"sync"
	"time"
)

// pausableDeadline is the run's deadline, which a question's wait does not
// count against (subagent.ask: the supervisor moves its own deadline of this
// subagent the same way, unless its policy charges the wait). At the
// deadline the run's context is cancelled with cause
// context.DeadlineExceeded; Deadline reports the deadline as it stands.
type pausableDeadline struct {
	mu     sync.Mutex // guards at, timer, paused, since
	at     time.Time
	timer  *time.Timer
	paused int // pauses in progress (questions may overlap: each call's own)
	since  time.Time
}

// withPausableDeadline returns ctx ending at at (cause
// context.DeadlineExceeded) unless paused, the deadline and a stop function.
func withPausableDeadline(ctx context.Context, at time.Time) (context.Context, *pausableDeadline, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	d := &pausableDeadline{at: at}
	d.timer = time.AfterFunc(time.Until(at), func() { cancel(context.DeadlineExceeded) })
	return deadlineCtx{cctx, d}, d, func() { d.timer.Stop(); cancel(nil) }
}

// pause stops the clock; resume starts it again, the deadline moved by the
// time paused.
func (d *pausableDeadline) pause() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused == 0 {
		if !d.timer.Stop() {
			d.paused++ // fired already: nothing to move
			d.since = time.Time{}
			return
		}
		d.since = time.Now()
	}
	d.paused++
}

func (d *pausableDeadline) resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.paused--
	if d.paused > 0 || d.since.IsZero() {
		return
	}
	d.at = d.at.Add(time.Since(d.since))
	d.since = time.Time{}
	d.timer.Reset(time.Until(d.at))
}

// current is the deadline as it stands (as far as it may move while paused,
// it is reported as it was when the pause began, moved so far).
func (d *pausableDeadline) current() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.since.IsZero() {
		return d.at.Add(time.Since(d.since))
	}
	return d.at
}

// deadlineCtx reports the pausable deadline as its Deadline.
type deadlineCtx struct {
	context.Context
	d *pausableDeadline
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.d.current(), true }
