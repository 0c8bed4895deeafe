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
// the key's breaker: no restart until an operator closes it (CloseBreaker).
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
	open        bool
	openedAt    time.Time
	last        Outcome
	lastAt      time.Time
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
	if o == OutcomeClean {
		st.consecutive = 0
		st.notBefore = now
		return Decision{NotBefore: now, Open: st.open}
	}
	w := 1
	if o == OutcomeCrashBeforeReady {
		w = g.cfg.CrashBeforeReadyWeight
	}
	st.failures = append(st.failures, failureAt{at: now, weight: w})
	st.consecutive++
	delay := g.backoff(st.consecutive)
	st.notBefore = now.Add(delay)
	if !st.open && st.weight() > g.cfg.MaxFailures {
		st.open, st.openedAt = true, now
		if g.cfg.Logger != nil {
			g.cfg.Logger.Warn("restart breaker open", "key", key, "failures", st.weight(), "window", g.cfg.Window.String())
		}
	}
	return Decision{Delay: delay, NotBefore: st.notBefore, Open: st.open}
}

// backoff is the delay after the n-th failure in a row (n >= 1).
func (g *Governor) backoff(n int) time.Duration {
	d := g.cfg.BaseBackoff
	for i := 1; i < n && d < g.cfg.MaxBackoff; i++ {
		d *= 2
	}
	if d >= g.cfg.MaxBackoff {
		return g.cfg.MaxBackoff - time.Duration(g.cfg.Jitter*g.cfg.Rand()*float64(g.cfg.MaxBackoff))
	}
	d += time.Duration(g.cfg.Jitter * g.cfg.Rand() * float64(d))
	if d > g.cfg.MaxBackoff {
		d = g.cfg.MaxBackoff
	}
	return d
}

// Allow reports whether key's child may start now: nil and 0 when it may, nil
// and the remaining backoff when it must wait, ErrBreakerOpen when it must not.
func (g *Governor) Allow(key string) (time.Duration, error) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	st, ok := g.keys[key]
	if !ok {
		return 0, nil
	}
	if st.open {
		return 0, ErrBreakerOpen
	}
	if wait := st.notBefore.Sub(now); wait > 0 {
		return wait, nil
	}
	return 0, nil
}

// Wait blocks until key's child may start, returning ErrBreakerOpen if its
// breaker is (or becomes) open, or the context's error.
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

// BreakerState is one key's restart state, for operators.
type BreakerState struct {
	Key         string
	Open        bool
	OpenedAt    time.Time // zero while closed
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
		st.prune(now, g.cfg.Window)
		out = append(out, BreakerState{
			Key: k, Open: st.open, OpenedAt: st.openedAt, Failures: st.weight(),
			Consecutive: st.consecutive, NextStart: st.notBefore,
			LastOutcome: st.last.String(), LastAt: st.lastAt,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Close closes key's breaker and forgets its failures, so its child may start
// at once. It reports whether the governor knew key.
func (g *Governor) Close(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ch, ok := g.closed[key]; ok {
		close(ch)
		delete(g.closed, key)
	}
	st, ok := g.keys[key]
	if !ok {
		return false
	}
	wasOpen := st.open
	*st = restartState{last: st.last, lastAt: st.lastAt}
	if wasOpen && g.cfg.Logger != nil {
		g.cfg.Logger.Info("restart breaker closed", "key", key)
	}
	return true
}

// Closed returns a channel that is closed at the next Close of key: a
// component whose breaker is open waits on it (and on its own context) instead
// of polling.
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
	if p.status.Status.Signaled() || p.status.Status.ExitStatus() != 0 {
		return OutcomeFailure
	}
	return OutcomeClean
}
