package trigger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// LoopKey is the restart governor's key of the loop session.
const LoopKey = "trigger:loop"

// Loop runs the root again after each run ends: Interval after the end of a
// run that ended clean, and after a failed run the longer of Interval and the
// restart governor's backoff. It stops after MaxRuns runs (0: no count), after
// a run whose status is in StopOn, when its breaker opens with StopOnBreaker
// set, or when ctx ends. Set the fields, then call Run once; Run refuses a Loop
// without a Runner or a Governor.
type Loop struct {
	Options
	Interval time.Duration
	MaxRuns  int
	StopOn   []api.TerminalStatus
}

// Run runs the loop. It returns the last run's result: with a nil error when
// the stop rule ended the loop, ErrBreakerOpen when the breaker did, or ctx's
// error (the running run cancelled and waited for).
func (l *Loop) Run(ctx context.Context) (api.SubagentResult, error) {
	if err := l.check(); err != nil {
		return api.SubagentResult{}, err
	}
	if l.Interval < 0 || l.MaxRuns < 0 {
		return api.SubagentResult{}, errors.New("trigger: loop: Interval and MaxRuns must not be negative")
	}
	var last api.SubagentResult
	attempt := 1
	for seq := 1; ; seq++ {
		if err := admit(ctx, &l.Options, LoopKey); err != nil {
			return last, err
		}
		ev := Event{Mode: ModeLoop, Session: LoopKey, Seq: seq, Attempt: attempt}
		res, out := runOnce(ctx, &l.Options, ev)
		last = res
		l.Governor.Record(LoopKey, out)
		if ctx.Err() != nil {
			return last, ctx.Err()
		}
		if slices.Contains(l.StopOn, res.Status) {
			l.Logger.Info("trigger: loop stopped: the run ended with a --stop-on status", "status", res.Status, "runs", seq)
			return last, nil
		}
		if l.MaxRuns > 0 && seq >= l.MaxRuns {
			l.Logger.Info("trigger: loop stopped: --max-runs reached", "runs", seq)
			return last, nil
		}
		if out == supervisor.OutcomeClean {
			attempt = 1
		} else {
			attempt++
		}
		if !sleep(ctx, l.Interval) {
			return last, ctx.Err()
		}
	}
}

// sleep waits d, or until ctx ends (then false).
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ParseStatuses parses a --stop-on list: terminal statuses, comma-separated.
func ParseStatuses(list []string) ([]api.TerminalStatus, error) {
	var out []api.TerminalStatus
	for _, s := range list {
		st := api.TerminalStatus(s)
		if !st.Valid() {
			return nil, fmt.Errorf("unknown status %q: want one of %s", s, statusNames())
		}
		out = append(out, st)
	}
	return out, nil
}

func statusNames() string {
	s := ""
	for i, st := range api.TerminalStatuses {
		if i > 0 {
			s += ", "
		}
		s += string(st)
	}
	return s
}
