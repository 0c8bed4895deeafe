package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// The restart governor paces restarts of children the supervisor keeps alive on
// purpose (a warm pool, a session-backing child). A one-shot root is never
// restarted and never goes through it. It is the temporal control over
// restarts; the structural fork-bomb caps live at the spawn chokepoint.

// ErrBreakerOpen refuses a restart while a key's circuit breaker is open.
var ErrBreakerOpen = errors.New("supervisor: restart breaker open")

// Outcome is how one life of a kept-alive child ended, as the governor weighs it.
type Outcome int

// Outcomes, from the governor's point of view.
const (
	// OutcomeClean is an exit 0 after the child sent its result: no failure.
	OutcomeClean Outcome = iota
	// OutcomeFailure is a non-zero exit, a death by signal, or a kill by a
	// detector, a deadline or a protocol violation.
	OutcomeFailure
	// OutcomeCrashBeforeReady is a child that ended before its ctrl/ready frame
	// (or could not be started): the fork-bomb early warning, weighted heavier.
	OutcomeCrashBeforeReady
	// OutcomeOutage is a life that ended because every model endpoint was
	// down (a result crashed, cause intelligence_unreachable): its backoff
	// grows as a failure's does, but it does not count toward the breaker,
	// since a restart is no worse than waiting for the endpoints (whose own
	// breakers keep a fresh child from calling a dead one).
	OutcomeOutage
)

// String names the outcome as Breakers reports it.
func (o Outcome) String() string {
	switch o {
	case OutcomeClean:
		return "clean"
	case OutcomeFailure:
		return "failure"
	case OutcomeCrashBeforeReady:
		return "crash_before_ready"
	case OutcomeOutage:
		return "outage"
	}
	return "unknown"
}

// GovernorConfig sets the governor's schedule. The zero value of a field means
// its default.
type GovernorConfig struct {
	BaseBackoff time.Duration // delay after the first failure in a row; default 500ms
	MaxBackoff  time.Duration // the delay never exceeds this; default 30s
	// Jitter is the largest fraction of the delay added at random; default 0.25.
	Jitter float64
	// Window and MaxFailures: the breaker opens when the weighted failures inside
	// Window exceed MaxFailures; defaults 60s and 5.
	Window      time.Duration
	MaxFailures int
	// CrashBeforeReadyWeight is the weight of OutcomeCrashBeforeReady; default 3.
	CrashBeforeReadyWeight int
	// CoolDown is how long an open breaker stays open before it half-opens
	// for one trial start; each trial that fails re-opens it for twice as
	// long, up to MaxCoolDown (with the same jitter as the backoff). Defaults:
	// MaxBackoff (the backoff goes on from where it stopped) and ten times
	// CoolDown.
	CoolDown    time.Duration
	MaxCoolDown time.Duration
	// Rand returns a number in [0, 1) for the jitter; default math/rand/v2.
	Rand func() float64
	// Logger hears when a breaker opens or is closed; default none.
	Logger *slog.Logger
}

func (c GovernorConfig) withDefaults() GovernorConfig {
	if c.BaseBackoff <= 0 {
		c.BaseBackoff = 500 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.MaxBackoff < c.BaseBackoff {
		c.MaxBackoff = c.BaseBackoff
	}
	if c.Jitter <= 0 {
		c.Jitter = 0.25
	}
	if c.Jitter > 1 {
		c.Jitter = 1
	}
	if c.Window <= 0 {
		c.Window = 60 * time.Second
	}
	if c.MaxFailures <= 0 {
		c.MaxFailures = 5
	}
	if c.CrashBeforeReadyWeight <= 0 {
		c.CrashBeforeReadyWeight = 3
	}
	if c.CoolDown <= 0 {
		c.CoolDown = c.MaxBackoff
	}
	if c.MaxCoolDown < c.CoolDown {
		c.MaxCoolDown = 10 * c.CoolDown
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

// Governor decides when a kept-alive child may start again, per key (a pool
// slot, a session handle). Each failure in a row doubles the delay before the
// next start: BaseBackoff·2^(n-1), capped at MaxBackoff, plus up to Jitter of
// it at random (at the cap the jitter is taken off instead, so the delay stays
// within [BaseBackoff, MaxBackoff]). A clean exit with a result is no failure and
// resets the delay. More than MaxFailures weighted failures inside Window open
// the key's breaker: no restart for a cool-down (CoolDown, doubling per
// opening since the breaker was last closed, up to MaxCoolDown). Then it is
// half-open: the next Allow (or Wait) grants one trial start, and the trial's
// outcome decides: clean closes the breaker and forgets the failures, a
// failure re-opens it with a longer cool-down. An operator may close it at
// any time (Close). Outcomes of lives that were not the trial (a child that
// started before the breaker opened) are counted but move the breaker in
// neither direction.
//
// A Governor is safe for concurrent use. Create it with NewGovernor; the zero
// value is not usable.
type Governor struct {
	cfg GovernorConfig

	mu     sync.Mutex // guards keys, closed
	keys   map[string]*restartState
	closed map[string]chan struct{} // closed and forgotten by the next Close of the key
}

type restartState struct {
	consecutive int         // failures since the last clean exit or close
	failures    []failureAt // inside the window, oldest first
	notBefore   time.Time   // no start before this
	open        bool        // open or half-open: no start but the trial
	openedAt    time.Time   // when it (last) opened
	trialAt     time.Time   // while open: when it half-opens
	trial       bool        // while half-open: the one trial start was granted
	opens       int         // openings since the breaker was last closed
	closedAt    time.Time   // when an open breaker was last closed; zero if never
	last        Outcome
	lastAt      time.Time
}

// reopen opens the breaker (again) at now, for the cool-down of its next
// opening.
func (g *Governor) reopen(key string, st *restartState, now time.Time) {
	st.open, st.trial = true, false
	st.opens++
	st.openedAt = now
	cool := g.delay(g.cfg.CoolDown, g.cfg.MaxCoolDown, st.opens)
	st.trialAt = now.Add(cool)
	if st.trialAt.Before(st.notBefore) {
		st.trialAt = st.notBefore
	}
	if g.cfg.Logger != nil {
		g.cfg.Logger.Warn("restart breaker open", "key", key, "failures", st.weight(), "window", g.cfg.Window.String(),
			"opening", st.opens, "cool_down", st.trialAt.Sub(now).String())
	}
}

// halfOpen reports whether an open breaker's cool-down is over.
func (st *restartState) halfOpen(now time.Time) bool {
	return st.open && !now.Before(st.trialAt)
}

type failureAt struct {
	at     time.Time
	weight int
}

// NewGovernor returns a governor with cfg's schedule.
func NewGovernor(cfg GovernorConfig) *Governor {
	return &Governor{cfg: cfg.withDefaults(), keys: make(map[string]*restartState), closed: make(map[string]chan struct{})}
}

// Decision is what the governor says after an outcome.
type Decision struct {
	Delay     time.Duration // wait this long before the next start
	NotBefore time.Time     // the same, as a time
	Open      bool          // the breaker is open: do not start again
}

// Record notes how one life of key's child ended and returns when it may start
// again.
func (g *Governor) Record(key string, o Outcome) Decision {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.state(key)
	st.last, st.lastAt = o, now
	st.prune(now, g.cfg.Window)
	trial := st.open && st.trial
	if o == OutcomeClean {
		st.consecutive = 0
		st.notBefore = now
		if trial {
			// The trial worked: closed, the failures forgotten, and whoever
			// waits for a close (Closed) woken.
			*st = restartState{last: o, lastAt: now, notBefore: now, closedAt: now}
			g.wakeLocked(key)
			if g.cfg.Logger != nil {
				g.cfg.Logger.Info("restart breaker closed: the trial start succeeded", "key", key)
			}
		}
		return Decision{NotBefore: now, Open: st.open}
	}
	if o == OutcomeOutage && !trial {
		st.consecutive++
		delay := g.backoff(st.consecutive)
		st.notBefore = now.Add(delay)
		return Decision{Delay: delay, NotBefore: st.notBefore, Open: st.open}
	}
	w := 1
	if o == OutcomeCrashBeforeReady {
		w = g.cfg.CrashBeforeReadyWeight
	}
	st.failures = append(st.failures, failureAt{at: now, weight: w})
	st.consecutive++
	delay := g.backoff(st.consecutive)
	st.notBefore = now.Add(delay)
	if trial || (!st.open && st.weight() > g.cfg.MaxFailures) {
		g.reopen(key, st, now)
	}
	return Decision{Delay: delay, NotBefore: st.notBefore, Open: st.open}
}

// backoff is the delay after the n-th failure in a row (n >= 1).
func (g *Governor) backoff(n int) time.Duration {
	return g.delay(g.cfg.BaseBackoff, g.cfg.MaxBackoff, n)
}

// delay is the n-th step (n >= 1) of the schedule base·2^(n-1) capped at
// limit, with jitter: up to Jitter of it added below the cap, taken off at it.
func (g *Governor) delay(base, limit time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	if d >= limit {
		return limit - time.Duration(g.cfg.Jitter*g.cfg.Rand()*float64(limit))
	}
	d += time.Duration(g.cfg.Jitter * g.cfg.Rand() * float64(d))
	if d > limit {
		d = limit
	}
	return d
}

// Allow reports whether key's child may start now: nil and 0 when it may, nil
// and the remaining backoff when it must wait, ErrBreakerOpen when it must not
// (the breaker is open, or half-open with its trial already granted). The
// first Allow that returns nil on a half-open breaker grants its one trial:
// the caller starts the child and Records how that life ended.
func (g *Governor) Allow(key string) (time.Duration, error) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	st, ok := g.keys[key]
	if !ok {
		return 0, nil
	}
	if st.open {
		if !st.halfOpen(now) || st.trial {
			return 0, ErrBreakerOpen
		}
		st.trial = true
		if g.cfg.Logger != nil {
			g.cfg.Logger.Info("restart breaker half-open: one trial start", "key", key, "opening", st.opens)
		}
		return 0, nil
	}
	if wait := st.notBefore.Sub(now); wait > 0 {
		return wait, nil
	}
	return 0, nil
}

// Wait blocks until key's child may start, returning ErrBreakerOpen if its
// breaker is (or becomes) open (NextTrial says until when), or the context's
// error. On a half-open breaker, a nil return is the trial (see Allow).
func (g *Governor) Wait(ctx context.Context, key string) error {
	for {
		wait, err := g.Allow(key)
		if err != nil || wait == 0 {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// Breaker states, as BreakerState.State names them.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"      // no start until NextTrial
	BreakerHalfOpen = "half-open" // the cool-down is over: one trial start (Trial: granted)
)

// BreakerState is one key's restart state, for operators.
type BreakerState struct {
	Key         string
	State       string    // BreakerClosed, BreakerOpen or BreakerHalfOpen
	Since       time.Time // when State began; zero for a breaker never opened
	Open        bool      // State is not closed: no start but the trial
	OpenedAt    time.Time // zero while closed
	NextTrial   time.Time // while open: when it half-opens
	Trial       bool      // while half-open: the trial start was granted and runs
	Openings    int       // times opened since it was last closed
	Failures    int       // weighted failures inside the window
	Consecutive int       // failures since the last clean exit
	NextStart   time.Time // no start before this
	LastOutcome string
	LastAt      time.Time
}

// Breakers returns every key's state, sorted by key.
func (g *Governor) Breakers() []BreakerState {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]BreakerState, 0, len(g.keys))
	for k, st := range g.keys {
		out = append(out, st.snapshot(k, now, g.cfg.Window))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Breaker returns key's state (a closed breaker for a key never seen).
func (g *Governor) Breaker(key string) BreakerState {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	st, ok := g.keys[key]
	if !ok {
		return BreakerState{Key: key, State: BreakerClosed, LastOutcome: "none"}
	}
	return st.snapshot(key, now, g.cfg.Window)
}

func (st *restartState) snapshot(key string, now time.Time, window time.Duration) BreakerState {
	st.prune(now, window)
	b := BreakerState{
		Key: key, State: BreakerClosed, Open: st.open, Openings: st.opens, Failures: st.weight(),
		Consecutive: st.consecutive, NextStart: st.notBefore,
		LastOutcome: st.last.String(), LastAt: st.lastAt,
	}
	if st.open {
		b.OpenedAt, b.NextTrial, b.Trial = st.openedAt, st.trialAt, st.trial
		b.State, b.Since = BreakerOpen, st.openedAt
		if st.halfOpen(now) {
			b.State, b.Since = BreakerHalfOpen, st.trialAt
		}
	} else if !st.closedAt.IsZero() {
		b.Since = st.closedAt
	}
	return b
}

// Close closes key's breaker and forgets its failures, so its child may start
// at once. It reports whether the governor knew key.
func (g *Governor) Close(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.wakeLocked(key)
	st, ok := g.keys[key]
	if !ok {
		return false
	}
	wasOpen := st.open
	*st = restartState{last: st.last, lastAt: st.lastAt, closedAt: st.closedAt}
	if wasOpen {
		st.closedAt = time.Now()
		if g.cfg.Logger != nil {
			g.cfg.Logger.Info("restart breaker closed by an operator", "key", key)
		}
	}
	return true
}

// wakeLocked closes and forgets the channel Closed handed out for key.
func (g *Governor) wakeLocked(key string) {
	if ch, ok := g.closed[key]; ok {
		close(ch)
		delete(g.closed, key)
	}
}

// Closed returns a channel that is closed at the next close of key's
// breaker, by Close or by a trial start that succeeded: a component whose
// breaker is open waits on it (and on its own context, and on the breaker's
// NextTrial if it makes the trial) instead of polling.
func (g *Governor) Closed(key string) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch, ok := g.closed[key]
	if !ok {
		ch = make(chan struct{})
		g.closed[key] = ch
	}
	return ch
}

// Forget drops key's state, for a child that is retired for good.
func (g *Governor) Forget(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.keys, key)
}

func (g *Governor) state(key string) *restartState {
	st, ok := g.keys[key]
	if !ok {
		st = &restartState{}
		g.keys[key] = st
	}
	return st
}

// prune drops failures older than the window.
func (st *restartState) prune(now time.Time, window time.Duration) {
	i := 0
	for i < len(st.failures) && now.Sub(st.failures[i].at) >= window {
		i++
	}
	st.failures = st.failures[i:]
}

func (st *restartState) weight() int {
	w := 0
	for _, f := range st.failures {
		w += f.weight
	}
	return w
}

// Governor returns the supervisor's restart governor, for the components that
// keep children alive on purpose (the warm pool).
func (s *Supervisor) Governor() *Governor { return s.gov }

// Breakers returns the restart breakers' states, for operators.
func (s *Supervisor) Breakers() []BreakerState { return s.gov.Breakers() }

// CloseBreaker closes key's restart breaker, for operators. It reports whether
// the key was known.
// Closing PoolKey's breaker resumes the warm pool's refills.
func (s *Supervisor) CloseBreaker(key string) bool {
	ok := s.gov.Close(key)
	if key == PoolKey {
		s.pool.wake()
	}
	return ok
}

// Outcome classifies how the run ended, for the restart governor. It blocks
// until Done.
func (r *Run) Outcome() Outcome {
	<-r.n.done
	return r.n.outcome()
}

// outcome is the governor's reading of an ended node: a crash before ready, a
// clean exit 0 after a result, or a failure (non-zero exit, a signal, a kill by
// a detector, or a process that never reaped).
func (n *node) outcome() Outcome {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.proc
	if p == nil || !p.ready.Load() {
		return OutcomeCrashBeforeReady
	}
	if !p.exited() || n.result == nil {
		return OutcomeFailure
	}
	if n.verdict != nil && n.verdict.status != api.StatusCancelled {
		return OutcomeFailure
	}
	if st := p.exitStatus().Status; st.Signaled() || st.ExitStatus() != 0 {
		return OutcomeFailure
	}
	return OutcomeClean
}
