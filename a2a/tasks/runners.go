package tasks

import (
	"sync/atomic"
	"time"
)

// maxIdleRunners is how many goroutines that ran an executor run wait for
// the next one at most; runnerIdle how long each waits before it ends.
const (
	maxIdleRunners = 4
	runnerIdle     = 200 * time.Millisecond
)

// runners runs executor runs on goroutines that ran earlier ones, when one
// is idle, instead of a new goroutine each time: a run's goroutine grows its
// stack by copying, a doubling at a time, as deep as the executor's calls
// go (a2abind's: three copies a run, about a tenth of figure 2's server CPU
// a message/send), where an earlier run's goroutine has the stack already.
// At most maxIdleRunners wait, each for runnerIdle; a run finding none
// idle gets a new goroutine, as before. NewEngine makes work; without it
// every run gets a new goroutine.
type runners struct {
	work chan func() // unbuffered: a send is taken only by an idle runner
	idle atomic.Int32
}

// launch runs f on an idle runner, or on a new goroutine.
func (r *runners) launch(f func()) {
	select {
	case r.work <- f:
	default:
		go r.loop(f)
	}
}

// loop runs f, then the runs handed to it while it waits idle.
func (r *runners) loop(f func()) {
	var t *time.Timer
	for {
		f()
		f = nil
		if r.idle.Add(1) > maxIdleRunners {
			r.idle.Add(-1)
			return
		}
		if t == nil {
			t = time.NewTimer(runnerIdle)
		} else {
			t.Reset(runnerIdle)
		}
		select {
		case f = <-r.work:
			r.idle.Add(-1)
		case <-t.C:
			r.idle.Add(-1)
			return
		}
	}
}
