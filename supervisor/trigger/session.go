package trigger

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// Overlap is what a session does with an event that arrives while one of its
// runs is under way.
type Overlap string

// Overlap policies (--overlap).
const (
	// OverlapSkip drops the new event.
	OverlapSkip Overlap = "skip"
	// OverlapQueue keeps one event to run once the current run ends; a newer
	// event replaces the one waiting (so the run that follows sees the latest
	// tick, or the latest content).
	OverlapQueue Overlap = "queue"
	// OverlapCancel cancels the running run (the kill ladder) and starts the
	// new event once it has ended. A run cancelled so is not a failure.
	OverlapCancel Overlap = "cancel"
)

// ParseOverlap parses an --overlap value.
func ParseOverlap(s string) (Overlap, error) {
	switch o := Overlap(s); o {
	case OverlapSkip, OverlapQueue, OverlapCancel:
		return o, nil
	}
	return "", fmt.Errorf("unknown overlap policy %q: want skip, queue or cancel", s)
}

// session runs the events of one session (one governor key) one at a time:
// the overlap policy decides about events that arrive during a run, a failed
// run is started again (Attempt+1) after the governor's backoff unless a newer
// event waits, and while the breaker is open every event is dropped: no spawn
// into a known-bad loop (docs/ARCHITECTURE.md §6.7; §16, item 11, on how the
// breaker departs from the original design).
type session struct {
	o       *Options
	key     string
	overlap Overlap
	in      chan Event
	// settled, if set, hears of every event that is done with: its run ended
	// (restarts aside), or it was dropped by the policy or the breaker.
	settled func(Event)
}

func newSession(o *Options, key string, overlap Overlap) *session {
	return &session{o: o, key: key, overlap: overlap, in: make(chan Event)}
}

// offer hands the session an event; it returns false if ctx ended first.
func (s *session) offer(ctx context.Context, ev Event) bool {
	select {
	case s.in <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// startedRun is a run with the event it serves.
type startedRun struct {
	ev         Event
	r          Run
	superseded bool // cancelled by OverlapCancel: not a failure
}

func (s *session) settle(ev Event) {
	if s.settled != nil {
		s.settled(ev)
	}
}

func (s *session) drop(ev Event, why string) {
	s.o.Logger.Info("trigger: event dropped: "+why, ev.LogAttrs()...)
	s.settle(ev)
}

// serve runs the session until ctx ends (its run cancelled and waited for),
// or, with StopOnBreaker, until the breaker opens.
func (s *session) serve(ctx context.Context) error {
	log := s.o.Logger
	var (
		pending     *Event
		cur         *startedRun
		backoff     <-chan struct{} // closed when the governor's backoff has passed
		broken      <-chan struct{} // the breaker is open; closed when an operator closes it
		stopBackoff = func() {}
		seq         int
	)
	defer func() { stopBackoff() }()
	for {
		if cur == nil && pending != nil && backoff == nil && broken == nil {
			closed := s.o.Governor.Closed(s.key)
			wait, err := s.o.Governor.Allow(s.key)
			switch {
			case errors.Is(err, supervisor.ErrBreakerOpen):
				s.drop(*pending, "restart breaker open")
				pending = nil
				if s.o.StopOnBreaker {
					log.Error("trigger: restart breaker open: the session failed", "trigger_session", s.key)
					return ErrBreakerOpen
				}
				log.Error("trigger: restart breaker open: events are dropped until an operator closes it", "trigger_session", s.key)
				broken = closed
			case wait > 0:
				bctx, cancel := context.WithTimeout(ctx, wait)
				stopBackoff, backoff = cancel, bctx.Done()
			default:
				ev := *pending
				pending = nil
				cur = &startedRun{ev: ev, r: s.start(ctx, ev)}
			}
		}
		var runDone <-chan struct{}
		if cur != nil {
			runDone = cur.r.Done()
		}
		select {
		case ev := <-s.in:
			seq++
			ev.Session, ev.Seq, ev.Attempt = s.key, seq, 1
			switch {
			case broken != nil:
				s.drop(ev, "restart breaker open")
			case cur == nil:
				if pending != nil {
					s.drop(*pending, "a newer event replaced it")
				}
				pending = &ev
			case s.overlap == OverlapSkip:
				s.drop(ev, "a run is under way (overlap skip)")
			case s.overlap == OverlapCancel && !cur.superseded:
				log.Info("trigger: cancelling the running run for a newer event (overlap cancel)", ev.LogAttrs()...)
				cur.superseded = true
				cur.r.Cancel("superseded by a newer trigger event (overlap cancel)")
				fallthrough
			default: // queue, or cancel with the cancel already sent
				if pending != nil {
					s.drop(*pending, "a newer event replaced it")
				}
				pending = &ev
			}
		case <-runDone:
			res := cur.r.Result()
			out := weigh(res, cur.r.Outcome())
			elog := log.With(cur.ev.LogAttrs()...)
			elog.Info(MsgRunEnded, "status", res.Status, "outcome", out.String(), "superseded", cur.superseded)
			if s.o.Ended != nil {
				s.o.Ended(cur.ev, res)
			}
			if !cur.superseded {
				s.o.Governor.Record(s.key, out)
			}
			switch {
			case out != supervisor.OutcomeClean && !cur.superseded && pending == nil:
				retry := cur.ev
				retry.Attempt++
				elog.Warn("trigger: run failed: restarting it after the governor's backoff", "next_attempt", retry.Attempt)
				pending = &retry
			default:
				s.settle(cur.ev)
			}
			cur = nil
		case <-backoff:
			stopBackoff()
			backoff = nil
			if ctx.Err() != nil {
				return ctx.Err()
			}
		case <-broken:
			log.Info("trigger: restart breaker closed", "trigger_session", s.key)
			broken = nil
		case <-ctx.Done():
			if cur != nil {
				cur.r.Cancel("trigger stopped: " + context.Cause(ctx).Error())
				<-cur.r.Done()
				if s.o.Ended != nil {
					s.o.Ended(cur.ev, cur.r.Result())
				}
			}
			return ctx.Err()
		}
	}
}

// start starts ev's run; a run that could not start is a run that ended at
// once, crashed, weighing as a crash before ready.
func (s *session) start(ctx context.Context, ev Event) Run {
	r, err := s.o.Runner.Start(ctx, ev)
	if err != nil {
		s.o.Logger.Warn("trigger: run did not start", append(ev.LogAttrs(), "err", err)...)
		return failedRun(err)
	}
	s.o.Logger.Info(MsgRunStarted, ev.LogAttrs()...)
	return r
}

// failedRun is a Run that never started.
func failedRun(err error) Run {
	done := make(chan struct{})
	close(done)
	return notStarted{done: done, err: err}
}

type notStarted struct {
	done chan struct{}
	err  error
}

func (n notStarted) Done() <-chan struct{} { return n.done }
func (n notStarted) Result() api.SubagentResult {
	return api.SubagentResult{Status: api.StatusCrashed, Detail: "the run did not start: " + n.err.Error(), Distillate: api.InlineText("")}
}
func (n notStarted) Outcome() supervisor.Outcome { return supervisor.OutcomeCrashBeforeReady }
func (n notStarted) Cancel(string)               {}
