package supervisor

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

func fixedRand(v float64) func() float64 { return func() float64 { return v } }

// The backoff doubles per failure in a row from 500ms and is capped at 30s;
// failures 61s apart never open the breaker, so the schedule shows alone.
func TestGovernorBackoffSchedule(t *testing.T) {
	for _, tc := range []struct {
		name string
		rand float64
		want []time.Duration
	}{
		{"no jitter", 0, []time.Duration{
			500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
			8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second,
		}},
		{"half jitter", 0.5, []time.Duration{
			562500 * time.Microsecond, 1125 * time.Millisecond, 2250 * time.Millisecond, 4500 * time.Millisecond,
			9 * time.Second, 18 * time.Second, 26250 * time.Millisecond, 26250 * time.Millisecond,
		}},
		{"full jitter never passes the cap", 0.999, []time.Duration{
			624875 * time.Microsecond, 1249750 * time.Microsecond, 2499500 * time.Microsecond, 4999 * time.Millisecond,
			9998 * time.Millisecond, 19996 * time.Millisecond, 22507500 * time.Microsecond, 22507500 * time.Microsecond,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := NewGovernor(GovernorConfig{Rand: fixedRand(tc.rand)})
				for i, want := range tc.want {
					start := time.Now()
					d := g.Record("k", OutcomeFailure)
					if d.Delay != want || d.Open {
						t.Fatalf("failure %d: delay %s open %v, want %s closed", i+1, d.Delay, d.Open, want)
					}
					if err := g.Wait(context.Background(), "k"); err != nil {
						t.Fatal(err)
					}
					if waited := time.Since(start); waited != want {
						t.Fatalf("failure %d: Wait took %s, want %s", i+1, waited, want)
					}
					time.Sleep(61 * time.Second) // out of the breaker's window
				}
				// A clean exit with a result is no failure and resets the delay.
				if d := g.Record("k", OutcomeClean); d.Delay != 0 || d.Open {
					t.Fatalf("clean exit: %+v", d)
				}
				if wait, err := g.Allow("k"); wait != 0 || err != nil {
					t.Fatalf("after a clean exit: Allow = %s %v", wait, err)
				}
				if d := g.Record("k", OutcomeFailure); d.Delay != tc.want[0] {
					t.Fatalf("first failure after a clean exit: delay %s, want %s", d.Delay, tc.want[0])
				}
			})
		})
	}
}

// With the real random source every delay stays within [raw, raw*1.25] below
// the cap and within [0.75*cap, cap] at it.
func TestGovernorJitterBounds(t *testing.T) {
	g := NewGovernor(GovernorConfig{Rand: rand.Float64})
	for i := 0; i < 2000; i++ {
		n := 1 + i%10
		d := g.backoff(n)
		raw := 500 * time.Millisecond << (n - 1)
		if raw >= 30*time.Second {
			if d < 22500*time.Millisecond || d > 30*time.Second {
				t.Fatalf("n=%d at the cap: delay %s out of [22.5s, 30s]", n, d)
			}
			continue
		}
		if d < raw || d > raw+raw/4 {
			t.Fatalf("n=%d: delay %s out of [%s, %s]", n, d, raw, raw+raw/4)
		}
	}
}

func TestGovernorBreaker(t *testing.T) {
	type step struct {
		after time.Duration // fake time before this outcome
		o     Outcome
		open  bool // the breaker is open after it
	}
	fail := func(after time.Duration, open bool) step { return step{after, OutcomeFailure, open} }
	crash := func(after time.Duration, open bool) step { return step{after, OutcomeCrashBeforeReady, open} }
	clean := func(after time.Duration, open bool) step { return step{after, OutcomeClean, open} }
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"five failures in a minute stay closed, the sixth opens", []step{
			fail(0, false), fail(time.Second, false), fail(time.Second, false), fail(time.Second, false),
			fail(time.Second, false), fail(time.Second, true),
		}},
		{"failures that leave the window do not count", []step{
			fail(0, false), fail(10*time.Second, false), fail(10*time.Second, false), fail(10*time.Second, false),
			fail(10*time.Second, false), fail(25*time.Second, false), // at 65s the first has left the window
			fail(time.Second, true),
		}},
		{"a crash before ready weighs three", []step{
			crash(0, false), crash(time.Second, true),
		}},
		{"one crash and two failures are five; one more opens", []step{
			crash(0, false), fail(time.Second, false), fail(time.Second, false), fail(time.Second, true),
		}},
		{"clean exits are no failures", []step{
			fail(0, false), clean(time.Second, false), fail(time.Second, false), clean(time.Second, false),
			fail(time.Second, false), fail(time.Second, false), clean(time.Second, false), fail(time.Second, false),
			clean(time.Second, false), clean(time.Second, false), fail(time.Second, true),
		}},
		{"an open breaker stays open after a clean exit that was not its trial", []step{
			crash(0, false), crash(time.Second, true), clean(10*time.Second, true), clean(10*time.Second, true),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := NewGovernor(GovernorConfig{Rand: fixedRand(0)})
				for i, st := range tc.steps {
					time.Sleep(st.after)
					d := g.Record("k", st.o)
					if d.Open != st.open {
						t.Fatalf("step %d (%s): open = %v, want %v", i+1, st.o, d.Open, st.open)
					}
					_, err := g.Allow("k")
					if st.open != errors.Is(err, ErrBreakerOpen) {
						t.Fatalf("step %d: Allow = %v with the breaker open = %v", i+1, err, st.open)
					}
				}
			})
		})
	}
}

// Operators read the breaker's state and close it; a closed breaker forgets
// the failures and allows a start at once.
func TestBreakerOperatorAPI(t *testing.T) {
	// The supervisor (and the process-wide reaper it may start) lives outside the
	// bubble; only the governor's clock is fake.
	s, err := New(Config{Restart: GovernorConfig{Rand: fixedRand(0)}})
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		g := s.Governor()
		g.Record("pool/1", OutcomeFailure)
		g.Record("pool/0", OutcomeCrashBeforeReady)
		time.Sleep(time.Second)
		g.Record("pool/0", OutcomeCrashBeforeReady)
		bs := s.Breakers()
		if len(bs) != 2 || bs[0].Key != "pool/0" || bs[1].Key != "pool/1" {
			t.Fatalf("breakers = %+v", bs)
		}
		b := bs[0]
		if !b.Open || b.Failures != 6 || b.Consecutive != 2 || b.LastOutcome != "crash_before_ready" || !b.OpenedAt.Equal(time.Now()) {
			t.Fatalf("pool/0 = %+v", b)
		}
		if bs[1].Open || bs[1].Failures != 1 {
			t.Fatalf("pool/1 = %+v", bs[1])
		}
		// Wait refuses an open breaker at once.
		if err := g.Wait(context.Background(), "pool/0"); !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("Wait on an open breaker = %v", err)
		}
		if !s.CloseBreaker("pool/0") {
			t.Fatal("CloseBreaker on a known key reported unknown")
		}
		if s.CloseBreaker("pool/9") {
			t.Fatal("CloseBreaker on an unknown key reported known")
		}
		if wait, err := g.Allow("pool/0"); wait != 0 || err != nil {
			t.Fatalf("after close: Allow = %s %v", wait, err)
		}
		if b := s.Breakers()[0]; b.Open || b.Failures != 0 || b.Consecutive != 0 {
			t.Fatalf("after close: %+v", b)
		}
		// The failures of the window are forgotten: it takes six more to open.
		for i := 0; i < 5; i++ {
			if d := g.Record("pool/0", OutcomeFailure); d.Open {
				t.Fatalf("reopened after %d failures", i+1)
			}
		}
		// Failures age out of the window while time passes.
		time.Sleep(time.Minute)
		if b := s.Breakers()[0]; b.Failures != 0 || b.Consecutive != 5 {
			t.Fatalf("a minute later: %+v", b)
		}
		// Wait honours its context.
		g.Record("pool/1", OutcomeFailure)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := g.Wait(ctx, "pool/1"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait past its context = %v", err)
		}
		g.Forget("pool/1")
		if wait, err := g.Allow("pool/1"); wait != 0 || err != nil {
			t.Fatalf("after Forget: Allow = %s %v", wait, err)
		}
	})
}

// Closed wakes a waiter at the next Close of its key, and only of its key.
func TestGovernorClosedWakesWaiter(t *testing.T) {
	g := NewGovernor(GovernorConfig{Window: time.Hour, MaxFailures: 1})
	for i := 0; i < 2; i++ {
		g.Record("k", OutcomeFailure)
	}
	if _, err := g.Allow("k"); !errors.Is(err, ErrBreakerOpen) {
		t.Fatalf("Allow = %v, want the breaker open", err)
	}
	woke := g.Closed("k")
	other := g.Closed("other")
	g.Close("other")
	select {
	case <-woke:
		t.Fatal("closing another key woke the waiter")
	default:
	}
	select {
	case <-other:
	default:
		t.Fatal("the other key's waiter was not woken")
	}
	g.Close("k")
	select {
	case <-woke:
	default:
		t.Fatal("Close did not wake the waiter")
	}
	if _, err := g.Allow("k"); err != nil {
		t.Fatalf("after Close: Allow = %v", err)
	}
	if g.Closed("k") == woke {
		t.Fatal("a closed channel was handed out again")
	}
}

// An open breaker half-opens after its cool-down and grants one trial start:
// a failed trial re-opens it for twice as long (up to MaxCoolDown), a clean
// one closes it and forgets the failures.
func TestBreakerHalfOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGovernor(GovernorConfig{
			BaseBackoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
			CoolDown: 100 * time.Millisecond, MaxCoolDown: 300 * time.Millisecond, Rand: fixedRand(0),
		})
		for i := 0; i < 6; i++ {
			g.Record("k", OutcomeFailure)
		}
		opened := time.Now()
		b := g.Breaker("k")
		if b.State != BreakerOpen || !b.Open || !b.Since.Equal(opened) || !b.NextTrial.Equal(opened.Add(100*time.Millisecond)) || b.Openings != 1 {
			t.Fatalf("after six failures: %+v", b)
		}
		if _, err := g.Allow("k"); !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("Allow during the cool-down = %v", err)
		}
		if err := g.Wait(context.Background(), "k"); !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("Wait during the cool-down = %v", err)
		}
		time.Sleep(99 * time.Millisecond)
		if b := g.Breaker("k"); b.State != BreakerOpen {
			t.Fatalf("1ms before the trial: %s", b.State)
		}
		time.Sleep(time.Millisecond)
		if b := g.Breaker("k"); b.State != BreakerHalfOpen || !b.Since.Equal(b.NextTrial) || b.Trial {
			t.Fatalf("at the end of the cool-down: %+v", b)
		}
		// One trial, whoever asks first.
		if err := g.Wait(context.Background(), "k"); err != nil {
			t.Fatalf("Wait on a half-open breaker = %v", err)
		}
		if _, err := g.Allow("k"); !errors.Is(err, ErrBreakerOpen) {
			t.Fatalf("a second start while the trial runs: %v", err)
		}
		if b := g.Breaker("k"); !b.Trial || b.State != BreakerHalfOpen {
			t.Fatalf("while the trial runs: %+v", b)
		}
		// The trial fails: open again, for 200ms; then for 300ms (the cap).
		for i, cool := range []time.Duration{200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond} {
			if d := g.Record("k", OutcomeCrashBeforeReady); !d.Open {
				t.Fatalf("failed trial %d left the breaker closed", i+1)
			}
			b := g.Breaker("k")
			if b.State != BreakerOpen || b.Openings != i+2 || !b.NextTrial.Equal(time.Now().Add(cool)) {
				t.Fatalf("after failed trial %d: %+v, want open for %s", i+1, b, cool)
			}
			time.Sleep(cool - time.Millisecond)
			if _, err := g.Allow("k"); !errors.Is(err, ErrBreakerOpen) {
				t.Fatalf("before cool-down %d ended: %v", i+2, err)
			}
			time.Sleep(time.Millisecond)
			if _, err := g.Allow("k"); err != nil {
				t.Fatalf("after cool-down %d: %v", i+2, err)
			}
		}
		// The trial works: closed, failures forgotten, a start allowed at once.
		if d := g.Record("k", OutcomeClean); d.Open {
			t.Fatal("a clean trial left the breaker open")
		}
		b = g.Breaker("k")
		if b.State != BreakerClosed || b.Open || b.Failures != 0 || b.Consecutive != 0 || b.Openings != 0 || !b.Since.Equal(time.Now()) {
			t.Fatalf("after a clean trial: %+v", b)
		}
		if wait, err := g.Allow("k"); wait != 0 || err != nil {
			t.Fatalf("after a clean trial: Allow = %s %v", wait, err)
		}
		// Five failures more do not re-open it: the old ones were forgotten.
		for i := 0; i < 5; i++ {
			if d := g.Record("k", OutcomeFailure); d.Open {
				t.Fatalf("re-opened after %d new failures", i+1)
			}
		}
		// Opened again, the cool-down starts over from CoolDown.
		g.Record("k", OutcomeFailure)
		if b := g.Breaker("k"); b.Openings != 1 || !b.NextTrial.Equal(time.Now().Add(100*time.Millisecond)) {
			t.Fatalf("re-opened: %+v", b)
		}
	})
}

// The default cool-down goes on from the backoff's cap: 30s, then 60s, up to
// ten times that; and an open breaker is never half-open before its backoff
// allows a start.
func TestBreakerCoolDownDefaults(t *testing.T) {
	c := GovernorConfig{}.withDefaults()
	if c.CoolDown != 30*time.Second || c.MaxCoolDown != 300*time.Second {
		t.Fatalf("defaults: cool-down %s, max %s", c.CoolDown, c.MaxCoolDown)
	}
	synctest.Test(t, func(t *testing.T) {
		g := NewGovernor(GovernorConfig{BaseBackoff: time.Second, MaxBackoff: time.Minute, CoolDown: time.Millisecond, Rand: fixedRand(0)})
		g.Record("k", OutcomeCrashBeforeReady)
		g.Record("k", OutcomeCrashBeforeReady) // open, backoff 2s
		if b := g.Breaker("k"); !b.NextTrial.Equal(time.Now().Add(2 * time.Second)) {
			t.Fatalf("trial at %s, want the backoff's 2s", time.Until(b.NextTrial))
		}
	})
}

// Outages (every model endpoint down) back off as failures do, doubling,
// but never open the breaker however many come in the window; a failure
// after them counts alone, and a clean run resets the backoff.
func TestGovernorOutagesBackOffWithoutOpening(t *testing.T) {
	g := NewGovernor(GovernorConfig{Rand: fixedRand(0), BaseBackoff: 10 * time.Millisecond, MaxBackoff: time.Second})
	want := 10 * time.Millisecond
	for i := range 20 {
		d := g.Record("k", OutcomeOutage)
		if d.Open || d.Delay != min(want, time.Second) {
			t.Fatalf("outage %d: %+v, want delay %s, closed", i+1, d, min(want, time.Second))
		}
		want *= 2
	}
	b := g.Breaker("k")
	if b.Open || b.Failures != 0 || b.Consecutive != 20 || b.LastOutcome != "outage" {
		t.Fatalf("breaker %+v", b)
	}
	if d := g.Record("k", OutcomeFailure); d.Open || g.Breaker("k").Failures != 1 {
		t.Fatalf("a failure after the outages: %+v, %+v", d, g.Breaker("k"))
	}
	if d := g.Record("k", OutcomeClean); d.Delay != 0 || g.Breaker("k").Consecutive != 0 {
		t.Fatalf("clean: %+v", d)
	}
}
