package trigger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// Mode is how a root is started: once, or by one of the standing triggers.
type Mode string

// The run modes (--mode).
const (
	ModeOnce     Mode = "once"     // one run, never restarted (not a trigger)
	ModeLoop     Mode = "loop"     // run again after each run ends (Loop)
	ModeSchedule Mode = "schedule" // run at each tick of a cron schedule (Schedule)
	ModeReactive Mode = "reactive" // run when a subscribed MCP resource changes (Reactive)
	ModeWorkflow Mode = "workflow" // one run of a workflow file (package workflow), never restarted
)

// Modes lists the modes in the order help text names them.
var Modes = []Mode{ModeOnce, ModeLoop, ModeSchedule, ModeReactive, ModeWorkflow}

// ParseMode parses a --mode value.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown mode %q: want %s", s, strings.Join(names, ", "))
}

// SessionBacking reports whether roots of mode m are session-backing: restarted
// under the restart governor when they fail. A once or workflow root is never
// restarted.
func (m Mode) SessionBacking() bool {
	return m == ModeLoop || m == ModeSchedule || m == ModeReactive
}

// Log messages of every trigger, for whoever reads agentd's log (the e2e
// tests do). Each run's lines carry the event's LogAttrs.
const (
	MsgRunStarted = "trigger: run started"
	MsgRunEnded   = "trigger: run ended"
	MsgMissedTick = "trigger: schedule: a tick was missed while agentd was down: running it once now"
)

// Event is one reason to start the root. Seed holds the slices the trigger
// adds to the root's seed (reactive: the resource's content).
type Event struct {
	Mode    Mode
	Session string // the restart governor's key
	Seq     int
	Attempt int
	Tick    time.Time // schedule
	Missed  bool      // schedule
	Server  string    // reactive
	URI     string    // reactive
	Reason  string    // reactive
	Seed    []api.SeedSlice
}

// Metadata returns the event as task metadata, under the Meta* keys.
func (e Event) Metadata() map[string]any {
	m := map[string]any{
		api.MetaTrigger:        string(e.Mode),
		api.MetaTriggerSession: e.Session,
		api.MetaTriggerSeq:     e.Seq,
		api.MetaTriggerAttempt: e.Attempt,
	}
	if !e.Tick.IsZero() {
		m[api.MetaTriggerTick] = e.Tick.UTC().Format(time.RFC3339Nano)
		if e.Missed {
			m[api.MetaTriggerMissed] = true
		}
	}
	if e.URI != "" {
		m[api.MetaTriggerServer], m[api.MetaTriggerResource], m[api.MetaTriggerReason] = e.Server, e.URI, e.Reason
	}
	return m
}

// LogAttrs returns the event as slog attributes.
func (e Event) LogAttrs() []any {
	attrs := []any{"trigger", string(e.Mode), "trigger_session", e.Session, "trigger_seq", e.Seq, "trigger_attempt", e.Attempt}
	if !e.Tick.IsZero() {
		attrs = append(attrs, "trigger_tick", e.Tick.UTC().Format(time.RFC3339Nano), "trigger_missed", e.Missed)
	}
	if e.URI != "" {
		attrs = append(attrs, "trigger_server", e.Server, "trigger_resource", e.URI, "trigger_reason", e.Reason)
	}
	return attrs
}

// Runner starts runs of the root: cmd wires it to the one-shot runner
// (agentd run) or to the task engine (agentd serve, where each run is an A2A
// task carrying Event.Metadata). Implementations are safe for concurrent use.
type Runner interface {
	// Start starts one run for ev. An error means no run exists (the service
	// is draining, say); the trigger counts it as a crash before ready.
	Start(ctx context.Context, ev Event) (Run, error)
}

// Run is one started run of the root.
type Run interface {
	// Done is closed when the run has ended.
	Done() <-chan struct{}
	// Result returns the run's result; it blocks until Done.
	Result() api.SubagentResult
	// Outcome is the restart governor's reading of how the run ended; it
	// blocks until Done.
	Outcome() supervisor.Outcome
	// Cancel runs the kill ladder on the run's tree and returns at once.
	Cancel(reason string)
}

// ErrBreakerOpen ends a trigger whose restart breaker opened when Options.
// StopOnBreaker is set (agentd run, where no operator can close it).
var ErrBreakerOpen = errors.New("trigger: restart breaker open, the session failed")

// Options are what every trigger needs. Runner and Governor are required;
// the zero value of the others is their default.
type Options struct {
	Runner Runner
	// Governor paces restarts of failed runs and holds the breaker of each
	// session; it is the supervisor's, so one a2a.Tree shows every breaker and
	// one operator method closes any.
	Governor *supervisor.Governor
	Logger   *slog.Logger // default discards
	// StopOnBreaker ends the trigger with ErrBreakerOpen when its breaker
	// opens, instead of waiting for an operator to close it.
	StopOnBreaker bool
	// Ended, if set, hears of every run's end, in order, from the trigger's
	// goroutine; it must not block.
	Ended func(Event, api.SubagentResult)
}

func (o *Options) check() error {
	if o.Runner == nil || o.Governor == nil {
		return errors.New("trigger: Options need a Runner and a Governor")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// runOnce starts ev and waits for its end, cancelling the run if ctx ends
// first (and still waiting for it). A failure to start is a crashed result
// weighing as a crash before ready.
func runOnce(ctx context.Context, o *Options, ev Event) (api.SubagentResult, supervisor.Outcome) {
	log := o.Logger.With(ev.LogAttrs()...)
	r, err := o.Runner.Start(ctx, ev)
	if err != nil {
		log.Warn("trigger: run did not start", "err", err)
		r = failedRun(err)
	} else {
		log.Info(MsgRunStarted)
	}
	select {
	case <-r.Done():
	case <-ctx.Done():
		r.Cancel("trigger stopped: " + context.Cause(ctx).Error())
		<-r.Done()
	}
	res := r.Result()
	out := weigh(res, r.Outcome())
	log.Info(MsgRunEnded, "status", res.Status, "outcome", out.String())
	if o.Ended != nil {
		o.Ended(ev, res)
	}
	return res, out
}

// weigh is the governor's reading of a run of a session: the run's own
// outcome, except that a run that ended crashed is a failure even when its
// process exited cleanly after reporting it (a model or a required MCP
// server that is down): restarted at once, such a session would spin.
//
// A run that crashed because every model endpoint was down
// (intelligence_unreachable) is an outage: restarted after a growing
// backoff, never opening the session's breaker, so the session comes back
// by itself when an endpoint does.
func weigh(res api.SubagentResult, out supervisor.Outcome) supervisor.Outcome {
	if out == supervisor.OutcomeClean && res.Status == api.StatusCrashed && res.Cause == api.CauseIntelligenceUnreachable {
		return supervisor.OutcomeOutage
	}
	if out == supervisor.OutcomeClean && res.Status == api.StatusCrashed {
		return supervisor.OutcomeFailure
	}
	return out
}

// admit waits until the governor lets session key start: its backoff passed
// and its breaker closed. With the breaker open it returns ErrBreakerOpen at
// once if StopOnBreaker is set, and otherwise waits for an operator to close
// it. It returns ctx's error if ctx ends first.
func admit(ctx context.Context, o *Options, key string) error {
	logged := false
	for {
		closed := o.Governor.Closed(key)
		err := o.Governor.Wait(ctx, key)
		if !errors.Is(err, supervisor.ErrBreakerOpen) {
			return err
		}
		if o.StopOnBreaker {
			o.Logger.Error("trigger: restart breaker open: the session failed", "trigger_session", key)
			return ErrBreakerOpen
		}
		if !logged {
			o.Logger.Error("trigger: restart breaker open: no run starts until an operator closes it", "trigger_session", key)
			logged = true
		}
		select {
		case <-closed:
			o.Logger.Info("trigger: restart breaker closed", "trigger_session", key)
			logged = false
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
