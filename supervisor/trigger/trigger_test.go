package trigger

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// Every test here runs in a synctest bubble: time is fake, and a Sleep or a
// timer advances it only once every goroutine of the bubble is blocked, so the
// schedules below are exact and take no wall time.

// outcome is how a fake run ends.
type outcome struct {
	after  time.Duration // how long it runs
	status api.TerminalStatus
	out    supervisor.Outcome
}

var clean = outcome{after: time.Second, status: api.StatusCompleted, out: supervisor.OutcomeClean}

// started is one run a fakeRunner started.
type started struct {
	at        time.Time
	ev        Event
	cancelled bool
}

// fakeRunner starts fake runs that end after their outcome's duration, with
// its status and governor outcome; plan gives the outcome of the n-th run
// (from 0), the last entry repeating.
type fakeRunner struct {
	plan []outcome

	mu   sync.Mutex
	runs []*started
}

func (f *fakeRunner) Start(ctx context.Context, ev Event) (Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.plan[min(len(f.runs), len(f.plan)-1)]
	s := &started{at: time.Now(), ev: ev}
	f.runs = append(f.runs, s)
	r := &fakeRun{done: make(chan struct{}), cancel: make(chan struct{}), o: o}
	go func() {
		t := time.NewTimer(o.after)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.cancel:
			f.mu.Lock()
			s.cancelled = true
			f.mu.Unlock()
			r.o = outcome{status: api.StatusCancelled, out: supervisor.OutcomeFailure}
		}
		close(r.done)
	}()
	return r, nil
}

func (f *fakeRunner) started() []started {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]started, len(f.runs))
	for i, s := range f.runs {
		out[i] = *s
	}
	return out
}

type fakeRun struct {
	done   chan struct{}
	cancel chan struct{}
	once   sync.Once
	o      outcome
}

func (r *fakeRun) Done() <-chan struct{} { return r.done }
func (r *fakeRun) Result() api.SubagentResult {
	<-r.done
	return api.SubagentResult{Status: r.o.status, Distillate: api.InlineText("x")}
}
func (r *fakeRun) Outcome() supervisor.Outcome { <-r.done; return r.o.out }
func (r *fakeRun) Cancel(string)               { r.once.Do(func() { close(r.cancel) }) }

// governor is the default schedule (docs/ARCHITECTURE.md §6.7) without jitter.
func governor() *supervisor.Governor {
	return supervisor.NewGovernor(supervisor.GovernorConfig{Rand: func() float64 { return 0 }})
}

func opts(r Runner, g *supervisor.Governor) Options {
	return Options{Runner: r, Governor: g, Logger: slog.New(slog.DiscardHandler)}
}

// gaps returns the times between consecutive starts.
func gaps(runs []started) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(runs); i++ {
		out = append(out, runs[i].at.Sub(runs[i-1].at))
	}
	return out
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A loop runs again Interval after each clean run, and --max-runs stops it
// with the last run's result.
func TestLoopIntervalAndMaxRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeRunner{plan: []outcome{clean}}
		l := &Loop{Options: opts(r, governor()), Interval: 10 * time.Second, MaxRuns: 3}
		res, err := l.Run(context.Background())
		if err != nil || res.Status != api.StatusCompleted {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		runs := r.started()
		if got, want := gaps(runs), []time.Duration{11 * time.Second, 11 * time.Second}; !equalDurations(got, want) {
			t.Fatalf("gaps between starts %v, want %v (1s run + 10s interval)", got, want)
		}
		for i, s := range runs {
			if s.ev.Mode != ModeLoop || s.ev.Seq != i+1 || s.ev.Attempt != 1 || s.ev.Session != LoopKey {
				t.Fatalf("run %d: event %+v", i, s.ev)
			}
		}
	})
}

// --stop-on ends the loop at the first run with a listed status.
func TestLoopStopOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeRunner{plan: []outcome{clean, clean, {after: time.Second, status: api.StatusRefused, out: supervisor.OutcomeClean}, clean}}
		l := &Loop{Options: opts(r, governor()), Interval: time.Second, StopOn: []api.TerminalStatus{api.StatusRefused}}
		res, err := l.Run(context.Background())
		if err != nil || res.Status != api.StatusRefused || len(r.started()) != 3 {
			t.Fatalf("Run = %+v, %v after %d runs; want refused after 3", res, err, len(r.started()))
		}
	})
}

// Failed runs restart after the governor's backoff (500ms, 1s, 2s...) when it
// is longer than the interval; the attempt counts up; more than 5 failures in
// 60s open the breaker, which ends a run-mode loop with ErrBreakerOpen.
func TestLoopRestartsUnderTheGovernor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := outcome{after: 100 * time.Millisecond, status: api.StatusCrashed, out: supervisor.OutcomeFailure}
		r := &fakeRunner{plan: []outcome{fail}}
		o := opts(r, governor())
		o.StopOnBreaker = true
		l := &Loop{Options: o, Interval: 200 * time.Millisecond}
		res, err := l.Run(context.Background())
		if !errors.Is(err, ErrBreakerOpen) || res.Status != api.StatusCrashed {
			t.Fatalf("Run = %+v, %v; want ErrBreakerOpen", res, err)
		}
		runs := r.started()
		// 6 failures open the breaker (more than 5); the waits before runs 2-6
		// are the run's 100ms plus max(200ms interval, backoff).
		want := []time.Duration{600 * time.Millisecond, 1100 * time.Millisecond, 2100 * time.Millisecond, 4100 * time.Millisecond, 8100 * time.Millisecond}
		if got := gaps(runs); !equalDurations(got, want) {
			t.Fatalf("gaps %v, want %v", got, want)
		}
		for i, s := range runs {
			if s.ev.Attempt != i+1 {
				t.Fatalf("run %d: attempt %d", i, s.ev.Attempt)
			}
		}
	})
}

// A crash before ctrl/ready weighs 3: two of them open the breaker. In serve
// mode (no StopOnBreaker) the loop then waits for an operator to close it, and
// goes on at once when one does.
func TestLoopCrashBeforeReadyOpensBreakerUntilClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		crash := outcome{after: 10 * time.Millisecond, status: api.StatusCrashed, out: supervisor.OutcomeCrashBeforeReady}
		r := &fakeRunner{plan: []outcome{crash, crash, clean}}
		g := governor()
		l := &Loop{Options: opts(r, g), Interval: time.Second, MaxRuns: 3}
		done := make(chan error, 1)
		go func() { _, err := l.Run(context.Background()); done <- err }()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := len(r.started()); n != 2 {
			t.Fatalf("%d runs before the operator acts, want 2 (the breaker open after two crashes)", n)
		}
		if b := g.Breakers(); len(b) != 1 || b[0].Key != LoopKey || !b[0].Open || b[0].Failures != 6 {
			t.Fatalf("breakers %+v", b)
		}
		closedAt := time.Now()
		g.Close(LoopKey)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		runs := r.started()
		if len(runs) != 3 || runs[2].at != closedAt {
			t.Fatalf("after the close: %d runs, the third at %v (closed at %v)", len(runs), runs[2].at, closedAt)
		}
	})
}

// Cancelling the context stops the loop and the running run with it.
func TestLoopCancelStopsRunningRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeRunner{plan: []outcome{{after: time.Hour, status: api.StatusCompleted, out: supervisor.OutcomeClean}}}
		l := &Loop{Options: opts(r, governor())}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := l.Run(ctx); done <- err }()
		time.Sleep(time.Minute)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		if runs := r.started(); len(runs) != 1 || !runs[0].cancelled {
			t.Fatalf("runs %+v, want one, cancelled", runs)
		}
	})
}

func TestParseSchedule(t *testing.T) {
	for _, ok := range []string{"*/15 * * * *", "0 9 * * MON-FRI", "@hourly", "@every 90s", "CRON_TZ=Europe/Paris 0 8 * * *"} {
		if _, err := ParseSchedule(ok); err != nil {
			t.Errorf("ParseSchedule(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "* * *", "61 * * * *", "@every 500ms", "@sometimes", "0 0 30 2 *", "every 5m"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", bad)
		}
	}
}

// runSchedule runs s in the bubble for d, then stops it.
func runSchedule(t *testing.T, s *Schedule, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	time.Sleep(d)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
}

// Ticks of a fixed interval and of a cron expression start runs at the tick
// times, each carrying its tick.
func TestScheduleTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // the bubble's clock starts at midnight UTC, 2000-01-01
		r := &fakeRunner{plan: []outcome{clean}}
		runSchedule(t, &Schedule{Options: opts(r, governor()), Spec: "*/15 * * * *"}, time.Hour+time.Second)
		runs := r.started()
		if len(runs) != 4 {
			t.Fatalf("%d runs in an hour of */15, want 4", len(runs))
		}
		for i, s := range runs {
			want := start.Add(time.Duration(i+1) * 15 * time.Minute)
			if !s.at.Equal(want) || !s.ev.Tick.Equal(want) || s.ev.Missed || s.ev.Mode != ModeSchedule || s.ev.Seq != i+1 {
				t.Fatalf("run %d at %v with %+v, want the tick %v", i, s.at, s.ev, want)
			}
		}
	})
}

// The overlap policies, with runs of 25s on a 10s interval.
func TestScheduleOverlap(t *testing.T) {
	long := outcome{after: 25 * time.Second, status: api.StatusCompleted, out: supervisor.OutcomeClean}
	for _, tc := range []struct {
		policy    Overlap
		wantStart []time.Duration // since start
		cancelled int
	}{
		// Ticks at 10, 20, ... 60s; the test stops at 62s. skip: 10 runs to
		// 35; 20 and 30 are skipped; 40 runs past the end; 50 and 60 are
		// skipped.
		{OverlapSkip, []time.Duration{10 * time.Second, 40 * time.Second}, 0},
		// queue: 10 runs to 35; 20 waits, 30 replaces it and runs at 35 to 60;
		// 40 waits, 50 replaces it, and at 60 the one waiting runs.
		{OverlapQueue, []time.Duration{10 * time.Second, 35 * time.Second, 60 * time.Second}, 0},
		// cancel: each tick cancels the run under way and starts at once.
		{OverlapCancel, []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 40 * time.Second, 50 * time.Second, 60 * time.Second}, 5},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				r := &fakeRunner{plan: []outcome{long}}
				g := governor()
				runSchedule(t, &Schedule{Options: opts(r, g), Spec: "@every 10s", Overlap: tc.policy}, 62*time.Second)
				runs := r.started()
				var got []time.Duration
				cancelled := 0
				for _, s := range runs {
					got = append(got, s.at.Sub(start))
					if s.cancelled {
						cancelled++
					}
				}
				// The last run is cancelled by the test's own stop.
				if !equalDurations(got, tc.wantStart) || cancelled != tc.cancelled+1 {
					t.Fatalf("starts %v with %d cancelled, want %v with %d", got, cancelled, tc.wantStart, tc.cancelled+1)
				}
				// A run cancelled for a newer tick is no failure.
				for _, b := range g.Breakers() {
					if b.Failures != 0 {
						t.Fatalf("breaker %+v counts failures", b)
					}
				}
			})
		})
	}
}

// A failed tick's run is restarted (attempt 2) after the governor's backoff.
func TestScheduleRestartsAFailedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fail := outcome{after: time.Second, status: api.StatusCrashed, out: supervisor.OutcomeFailure}
		r := &fakeRunner{plan: []outcome{fail, clean}}
		runSchedule(t, &Schedule{Options: opts(r, governor()), Spec: "@hourly"}, time.Hour+time.Minute)
		runs := r.started()
		if len(runs) != 2 {
			t.Fatalf("%d runs, want the tick and its restart", len(runs))
		}
		tick := start.Add(time.Hour)
		if !runs[1].ev.Tick.Equal(tick) || runs[1].ev.Attempt != 2 || runs[1].ev.Seq != 1 || runs[1].at != tick.Add(1500*time.Millisecond) {
			t.Fatalf("restart %+v at %v, want the same tick, attempt 2, at +1.5s", runs[1].ev, runs[1].at.Sub(start))
		}
	})
}

// With a state file, a tick missed while agentd was down runs once at start
// (however many were missed), and each tick dealt with is saved. Without
// one, a restart cannot know and starts from now.
func TestScheduleMissedTickRunsOnceAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		state := filepath.Join(t.TempDir(), "schedule.json")
		// The last tick agentd dealt with was 65 minutes ago: the 10-minute
		// ticks at -55, -45, ... -5 were missed.
		if err := writeState(state, scheduleState{Spec: "@every 10m", LastTick: start.Add(-65 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		r := &fakeRunner{plan: []outcome{clean}}
		runSchedule(t, &Schedule{Options: opts(r, governor()), Spec: "@every 10m", StateFile: state}, 10*time.Minute+2*time.Second)
		runs := r.started()
		if len(runs) != 2 {
			t.Fatalf("%d runs, want the missed tick once and then the next tick", len(runs))
		}
		if !runs[0].at.Equal(start) || !runs[0].ev.Missed || !runs[0].ev.Tick.Equal(start.Add(-5*time.Minute)) {
			t.Fatalf("first run at %v: %+v; want at once, the latest missed tick (-5m)", runs[0].at.Sub(start), runs[0].ev)
		}
		if runs[1].ev.Missed || !runs[1].ev.Tick.Equal(start.Add(10*time.Minute)) {
			t.Fatalf("second run %+v", runs[1].ev)
		}
		b, err := os.ReadFile(state)
		if err != nil || !strings.Contains(string(b), start.Add(10*time.Minute).UTC().Format("15:04")) {
			t.Fatalf("state after the runs: %s %v", b, err)
		}

		// No state file: nothing is caught up.
		r2 := &fakeRunner{plan: []outcome{clean}}
		runSchedule(t, &Schedule{Options: opts(r2, governor()), Spec: "@every 10m"}, time.Minute)
		if n := len(r2.started()); n != 0 {
			t.Fatalf("without state %d runs at start", n)
		}
		// A state file whose last tick is recent misses nothing either.
		r3 := &fakeRunner{plan: []outcome{clean}}
		if err := writeState(state, scheduleState{LastTick: time.Now().Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
		runSchedule(t, &Schedule{Options: opts(r3, governor()), Spec: "@every 10m", StateFile: state}, time.Minute)
		if n := len(r3.started()); n != 0 {
			t.Fatalf("a recent last tick: %d runs at start", n)
		}
	})
}

// fakeSource is a Subscriber whose updates the test sends.
type fakeSource struct {
	mu  sync.Mutex
	fns map[Subscription]func(Update)
}

func (f *fakeSource) subscribe(sub Subscription, fn func(Update)) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fns == nil {
		f.fns = make(map[Subscription]func(Update))
	}
	f.fns[sub] = fn
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.fns, sub)
	}, nil
}

func (f *fakeSource) send(sub Subscription, u Update) {
	f.mu.Lock()
	fn := f.fns[sub]
	f.mu.Unlock()
	fn(u)
}

// Updates inside the debounce window coalesce into one run with the latest
// content as a seed slice; an update during a run waits (queue) and runs with
// the latest content; an error starts nothing; each subscription is its own
// session.
func TestReactiveDebounceAndQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := Subscription{Server: "s", URI: "demo://a"}
		b := Subscription{Server: "s", URI: "demo://b"}
		src := &fakeSource{}
		r := &fakeRunner{plan: []outcome{{after: 10 * time.Second, status: api.StatusCompleted, out: supervisor.OutcomeClean}}}
		rt := &Reactive{Options: opts(r, governor()), Subs: []Subscription{a, b}, Subscribe: src.subscribe, Debounce: time.Second}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rt.Run(ctx) }()
		synctest.Wait()
		start := time.Now()
		src.send(a, Update{Reason: "subscribed", Text: "a1"})
		time.Sleep(300 * time.Millisecond)
		src.send(a, Update{Reason: "updated", Text: "a2"})
		src.send(a, Update{Reason: "updated", Err: errors.New("read failed")})
		time.Sleep(2 * time.Second) // the window closed at +1s: one run with a2
		src.send(a, Update{Reason: "updated", Text: "a3"})
		time.Sleep(2 * time.Second)
		src.send(a, Update{Reason: "updated", Text: "a4"}) // replaces a3, waiting
		src.send(b, Update{Reason: "subscribed", Text: "b1"})
		time.Sleep(30 * time.Second)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v", err)
		}
		type want struct {
			at   time.Duration
			uri  string
			text string
		}
		var got []want
		for _, s := range r.started() {
			if len(s.ev.Seed) != 1 || s.ev.Seed[0].Label != SeedLabel(Subscription{Server: s.ev.Server, URI: s.ev.URI}) || s.ev.Mode != ModeReactive {
				t.Fatalf("event %+v", s.ev)
			}
			got = append(got, want{s.at.Sub(start), s.ev.URI, s.ev.Seed[0].Content.Text})
		}
		exp := []want{
			{time.Second, "demo://a", "a2"},
			{11 * time.Second, "demo://a", "a4"}, // a3 and a4 waited for the run to end
			{4300*time.Millisecond + time.Second, "demo://b", "b1"},
		}
		if len(got) != len(exp) {
			t.Fatalf("runs %+v, want %+v", got, exp)
		}
		for _, e := range exp {
			found := false
			for _, g := range got {
				if g == e {
					found = true
				}
			}
			if !found {
				t.Fatalf("runs %+v, want %+v among them", got, e)
			}
		}
	})
}

// While a subscription's breaker is open its updates are dropped; once an
// operator closes it, the next update runs.
func TestReactiveBreakerDropsUpdates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := Subscription{Server: "s", URI: "demo://a"}
		src := &fakeSource{}
		crash := outcome{after: 10 * time.Millisecond, status: api.StatusCrashed, out: supervisor.OutcomeCrashBeforeReady}
		r := &fakeRunner{plan: []outcome{crash, crash, clean}}
		g := governor()
		rt := &Reactive{Options: opts(r, g), Subs: []Subscription{a}, Subscribe: src.subscribe, Debounce: -1}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- rt.Run(ctx) }()
		synctest.Wait()
		src.send(a, Update{Reason: "subscribed", Text: "v1"})
		time.Sleep(time.Minute) // crash, restart after 500ms, crash: open
		if n := len(r.started()); n != 2 {
			t.Fatalf("%d runs, want 2", n)
		}
		src.send(a, Update{Reason: "updated", Text: "v2"})
		time.Sleep(time.Minute)
		if n := len(r.started()); n != 2 {
			t.Fatalf("an update ran while the breaker was open (%d runs)", n)
		}
		g.Close(a.Key())
		synctest.Wait()
		src.send(a, Update{Reason: "updated", Text: "v3"})
		time.Sleep(time.Minute)
		runs := r.started()
		if len(runs) != 3 || runs[2].ev.Seed[0].Content.Text != "v3" || runs[1].ev.Attempt != 2 {
			t.Fatalf("runs %+v", runs)
		}
		cancel()
		<-done
	})
}

func TestParseSubscriptionAndOverlap(t *testing.T) {
	if s, err := ParseSubscription("everything=demo://resource/dynamic/text/1"); err != nil || s.Server != "everything" || s.URI != "demo://resource/dynamic/text/1" {
		t.Fatalf("ParseSubscription = %+v, %v", s, err)
	}
	for _, bad := range []string{"", "x", "=u", "s="} {
		if _, err := ParseSubscription(bad); err == nil {
			t.Errorf("ParseSubscription(%q) accepted", bad)
		}
	}
	if _, err := ParseOverlap("sometimes"); err == nil {
		t.Fatal("ParseOverlap accepted a bad policy")
	}
	if _, err := ParseStatuses([]string{"completed", "nope"}); err == nil {
		t.Fatal("ParseStatuses accepted a bad status")
	}
	if _, err := ParseMode("forever"); err == nil {
		t.Fatal("ParseMode accepted a bad mode")
	}
}

// weigh: a run that crashed because every model endpoint was down is an
// outage (backoff without the breaker), whichever trigger ran it; another
// crash reported by a clean exit is a failure; the process's own outcome
// stands otherwise.
func TestWeighOutage(t *testing.T) {
	for _, tc := range []struct {
		res  api.SubagentResult
		out  supervisor.Outcome
		want supervisor.Outcome
	}{
		{api.SubagentResult{Status: api.StatusCrashed, Cause: api.CauseIntelligenceUnreachable}, supervisor.OutcomeClean, supervisor.OutcomeOutage},
		{api.SubagentResult{Status: api.StatusCrashed, Cause: api.CauseIntelligenceUnreachable}, supervisor.OutcomeFailure, supervisor.OutcomeFailure},
		{api.SubagentResult{Status: api.StatusCrashed}, supervisor.OutcomeClean, supervisor.OutcomeFailure},
		{api.SubagentResult{Status: api.StatusCompleted}, supervisor.OutcomeClean, supervisor.OutcomeClean},
	} {
		if got := weigh(tc.res, tc.out); got != tc.want {
			t.Errorf("weigh(%s/%s, %s) = %s, want %s", tc.res.Status, tc.res.Cause, tc.out, got, tc.want)
		}
	}
}
