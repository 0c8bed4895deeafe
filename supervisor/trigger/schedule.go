package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ScheduleKey is the restart governor's key of the schedule session.
const ScheduleKey = "trigger:schedule"

// ParseSchedule parses a --schedule value with the cron/v3 standard parser: a
// five-field cron expression (minute hour day-of-month month day-of-week,
// such as "*/15 * * * *"), optionally after CRON_TZ=ZONE; a descriptor
// (@yearly, @monthly, @weekly, @daily, @hourly); or a fixed interval,
// "@every DURATION" (whole seconds, at least 1s). A schedule that never fires
// (such as February 30th) is refused.
func ParseSchedule(spec string) (cron.Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New("empty schedule")
	}
	if d, ok := strings.CutPrefix(spec, "@every "); ok {
		// cron.Every rounds an interval down to whole seconds, and up to 1s:
		// refuse what it would silently change.
		iv, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, err
		}
		if iv < time.Second || iv%time.Second != 0 {
			return nil, fmt.Errorf("%q: the interval must be whole seconds, at least 1s", spec)
		}
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, err
	}
	// Next returns the zero time when nothing matches within five years.
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("%q never fires", spec)
	}
	return s, nil
}

// Schedule runs the root at each tick of Spec. A tick that comes while a run
// is under way follows Overlap. A failed run is restarted under the restart
// governor (a newer tick replaces the restart).
//
// With StateFile set, the time of the last tick dealt with (its run ended, or
// the tick was dropped by the policy or the breaker) is kept there, and at
// start a tick that fell while agentd was down runs once, at once, as the
// latest missed tick (Event.Missed), however many were missed. Without a state
// file a restart cannot know what it missed: the schedule starts from now.
// Set the fields, then call Run once; Run refuses an invalid Spec.
type Schedule struct {
	Options
	Spec      string
	Overlap   Overlap // default OverlapSkip
	StateFile string
}

// scheduleState is the state file's content.
type scheduleState struct {
	Spec     string    `json:"spec"`
	LastTick time.Time `json:"last_tick"`
}

// Run runs the schedule until ctx ends (the running run is cancelled and
// waited for), or until its breaker opens with StopOnBreaker set.
func (s *Schedule) Run(ctx context.Context) error {
	if err := s.check(); err != nil {
		return err
	}
	sched, err := ParseSchedule(s.Spec)
	if err != nil {
		return fmt.Errorf("trigger: schedule: %w", err)
	}
	overlap := s.Overlap
	if overlap == "" {
		overlap = OverlapSkip
	}
	last := s.readState()
	sess := newSession(&s.Options, ScheduleKey, overlap)
	persisted := last
	sess.settled = func(ev Event) {
		if s.StateFile == "" || !ev.Tick.After(persisted) {
			return
		}
		persisted = ev.Tick
		if err := writeState(s.StateFile, scheduleState{Spec: s.Spec, LastTick: ev.Tick}); err != nil {
			s.Logger.Error("trigger: schedule state not saved: a restart may run a tick again", "state_file", s.StateFile, "err", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- sess.serve(ctx) }()

	now := time.Now()
	if missed, ok := lastMissed(sched, last, now); ok {
		s.Logger.Info(MsgMissedTick, "trigger_tick", missed.UTC().Format(time.RFC3339Nano), "last_tick", last.UTC().Format(time.RFC3339Nano))
		sess.offer(ctx, Event{Mode: ModeSchedule, Tick: missed, Missed: true})
	}
	next := sched.Next(now)
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-t.C:
			if !sess.offer(ctx, Event{Mode: ModeSchedule, Tick: next}) {
				cancel()
				return <-served
			}
			// The tick after the one just served, or after now if serving it
			// took past later ones (they are not run: they overlapped).
			next = sched.Next(next)
			if now := time.Now(); !next.After(now) {
				next = sched.Next(now)
			}
		case err := <-served:
			t.Stop()
			return err
		}
	}
}

// lastMissed returns the latest tick of sched after last and at or before
// now, if there is one. A zero last (no state) misses nothing.
func lastMissed(sched cron.Schedule, last, now time.Time) (time.Time, bool) {
	if last.IsZero() {
		return time.Time{}, false
	}
	t := sched.Next(last)
	if t.IsZero() || t.After(now) {
		return time.Time{}, false
	}
	// Walk to the latest one; bounded, as a one-second schedule down for
	// years would otherwise walk long.
	for i := 0; i < 1_000_000; i++ {
		n := sched.Next(t)
		if n.IsZero() || n.After(now) {
			break
		}
		t = n
	}
	return t, true
}

// readState returns the last tick from the state file; none when there is no
// file (first start) or it cannot be read (logged: the schedule starts from
// now).
func (s *Schedule) readState() time.Time {
	if s.StateFile == "" {
		return time.Time{}
	}
	b, err := os.ReadFile(s.StateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}
	}
	var st scheduleState
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		s.Logger.Error("trigger: schedule state unreadable: starting from now, a missed tick is not run", "state_file", s.StateFile, "err", err)
		return time.Time{}
	}
	return st.LastTick
}

// writeState replaces the state file atomically: a temporary file in the same
// directory, synced, then renamed over it.
func writeState(path string, st scheduleState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
