package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/api"
)

// The warm pool keeps a few children started ahead of time: re-exec'd with the
// supervisor's environment, rlimits and process group like every child, past
// their ctrl/ready, blocked reading the spawn frame. A spawn takes one and
// writes its payload as the first frame, so the fork, exec and package init of
// the child (tens of milliseconds) leave the request path and nothing changes
// in the control protocol: a pooled child is a started child that has not been
// sent its payload yet.
//
// A pooled child is not a subagent until it is assigned: it counts against no
// cap, belongs to no tree, and is watched only for its death (it says nothing
// while it waits). Refills run in the background, one child at a time, through
// the restart governor under the key PoolKey: a refill that crashes before
// ctrl/ready weighs CrashBeforeReadyWeight, an idle child that dies weighs 1,
// and once the breaker opens the pool stops refilling and every spawn is a cold
// re-exec, so a broken binary cannot fork-bomb the host. After the breaker's
// cool-down it half-opens and the pool makes one trial refill: a child that
// reaches ctrl/ready closes the breaker and refills resume; one that fails
// re-opens it for a longer cool-down (GovernorConfig.CoolDown). So the pool
// comes back by itself from a transient fault (children killed from outside,
// a moment of fd exhaustion), and Supervisor.CloseBreaker on PoolKey (the
// operators' a2a.CloseBreaker) resumes refills at once. Shutdown and KillAll SIGKILL the pool's children
// at once (they hold no work) and wait for their reap.
//
// With Config.PoolRehearse, the child next in line (the head of idle, which
// the next take hands out) is sent ctrl/rehearse once, when it becomes the
// head: at its ready, or when a retirement or a death moves it up, and after
// a take once the taken child is reaped or the refill delay has passed
// (taken). It rehearses its payload's path while it waits (internal/agent),
// so a warm spawn finds its caches built; the others wait without them
// (about 150 KiB of private memory each, figure 9). The frame is written under mu, so it
// goes before the spawn frame of the take that hands the child out.

// PoolKey is the restart governor's key for the warm pool's refills.
const PoolKey = "warm-pool"

// refillDelay is how long the refill after a take waits at most: a start is a
// fork, an exec and several milliseconds of runtime and package init on one
// core, which would otherwise compete with the child just given its payload
// (on a small machine it doubled the time to that child's first step). The
// refill starts earlier when the taken child is reaped first (pool.taken): a
// short run (one model step) has answered by then, so its refill follows its
// response instead of landing on the next request, and the pool is short of
// a child for less time than the delay.
const refillDelay = 10 * time.Millisecond

// PoolStats describes the warm pool, for operators, metrics and tests.
type PoolStats struct {
	Size        int   // configured size; 0 when there is no pool
	Idle        int   // children ready and waiting for a payload
	Starting    int   // children started, not yet ready
	Assigned    int64 // spawns served by a warm child
	Cold        int64 // spawns that found the pool empty and re-exec'd cold
	Replaced    int64 // idle children that died and were replaced
	Failed      int64 // refills that failed before ctrl/ready
	BreakerOpen bool  // refills stopped by the restart breaker (open or half-open)
	// Breaker is the restart breaker of the refills (Governor key PoolKey).
	Breaker BreakerState
}

// pool is the warm pool. Safe for concurrent use; a nil *pool is an empty,
// disabled pool.
type pool struct {
	s    *Supervisor
	size int
	log  *slog.Logger // tagged warm_pool=true; an idle child's stderr goes here

	mu      sync.Mutex           // guards idle, members, closed
	idle    []*poolEntry         // ready children, oldest first
	members map[*proc]*poolEntry // every child of the pool not yet assigned or reaped
	closed  bool

	kick   chan struct{} // wakes the refill loop; capacity 1
	delay  time.Duration // refillDelay; tests shorten or lengthen it before any take
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the refill loop and the idle watchers

	assigned, cold, replaced, failed atomic.Int64
	breakerLogged                    atomic.Bool
}

type poolEntry struct {
	p       *proc
	envs    *envSet       // the environment it started with (keyenv.go)
	claimed chan struct{} // closed when a spawn takes the child, or it is retired
	// rehearsed is set once the child has been sent ctrl/rehearse; guarded
	// by the pool's mu.
	rehearsed bool
}

func newPool(s *Supervisor, size int) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	pl := &pool{
		s:       s,
		size:    size,
		log:     s.log.With("warm_pool", true),
		members: make(map[*proc]*poolEntry),
		kick:    make(chan struct{}, 1),
		delay:   refillDelay,
		ctx:     ctx,
		cancel:  cancel,
	}
	pl.wg.Add(1)
	go pl.refill()
	return pl
}

// wake nudges the refill loop.
func (pl *pool) wake() {
	if pl == nil {
		return
	}
	select {
	case pl.kick <- struct{}{}:
	default:
	}
}

// take hands out a ready child, or nil when the pool is empty (or off). The
// caller owns the child from then on: it is a node's process like any other,
// and calls taken once it has been reaped. The refill of its place starts
// then, or after the pool's delay if that comes first.
func (pl *pool) take() *proc {
	if pl == nil {
		return nil
	}
	pl.mu.Lock()
	for len(pl.idle) > 0 {
		e := pl.idle[0]
		pl.idle[0] = nil
		pl.idle = pl.idle[1:]
		if e.p.exited() {
			continue // its watcher counts the death and replaces it
		}
		if !pl.s.current(e.envs) {
			pl.retireLocked(e) // started with keys no longer in force
			continue
		}
		delete(pl.members, e.p)
		close(e.claimed)
		pl.mu.Unlock()
		pl.assigned.Add(1)
		time.AfterFunc(pl.delay, pl.taken)
		return e.p
	}
	pl.mu.Unlock()
	pl.cold.Add(1)
	return nil
}

// taken tells the pool that a child take handed out has been reaped (or
// abandoned): its place is refilled now if the delay has not done it yet,
// and the child that moved up to the head is sent ctrl/rehearse. Both wait
// for this, or the delay, for the same reason: a rehearsal (about a
// millisecond of CPU) beside the taken child's first step slowed it (figure
// 1's warm spawn p50 from 0.7 to 1.2 ms on two loaded cores).
func (pl *pool) taken() {
	if pl == nil {
		return
	}
	pl.mu.Lock()
	pl.rehearseHeadLocked()
	pl.mu.Unlock()
	pl.wake()
}

// need reports whether the pool holds fewer children than its size.
func (pl *pool) need() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return !pl.closed && len(pl.members) < pl.size
}

// refill keeps the pool full, one start at a time, paced by the governor.
func (pl *pool) refill() {
	defer pl.wg.Done()
	for {
		if !pl.need() {
			select {
			case <-pl.kick:
				continue
			case <-pl.ctx.Done():
				return
			}
		}
		err := pl.s.gov.Wait(pl.ctx, PoolKey)
		if errors.Is(err, ErrBreakerOpen) {
			b := pl.s.gov.Breaker(PoolKey)
			if pl.breakerLogged.CompareAndSwap(false, true) {
				pl.log.Error("warm pool: restart breaker open, refills stopped; spawns re-exec cold until a trial refill succeeds or an operator closes it",
					"key", PoolKey, "next_trial", b.NextTrial, "cool_down", time.Until(b.NextTrial).String())
			}
			var cooled <-chan time.Time
			var t *time.Timer
			if !b.Trial {
				t = time.NewTimer(max(time.Until(b.NextTrial), 0))
				cooled = t.C
			}
			select {
			case <-pl.kick: // a take, a death, or CloseBreaker
			case <-cooled: // half-open: the next Wait grants the trial
			case <-pl.ctx.Done():
			}
			if t != nil {
				t.Stop()
			}
			continue
		}
		if err != nil {
			return // closed
		}
		pl.breakerLogged.Store(false)
		trial := pl.s.gov.Breaker(PoolKey).Trial
		if trial {
			pl.log.Info("warm pool: breaker half-open: one trial refill", "key", PoolKey)
		}
		if pl.startOne() && trial {
			pl.log.Info("warm pool: the trial refill reached ctrl/ready: breaker closed, refills resume", "key", PoolKey)
		}
	}
}

// startOne starts one child and, once it is ready, adds it to the pool. It
// reports whether the child reached ctrl/ready.
func (pl *pool) startOne() bool {
	spec := pl.s.procSpec(pl.log)
	p, err := startProc(spec)
	if err != nil {
		pl.failed.Add(1)
		pl.log.Error("warm pool: start failed", "err", err)
		pl.s.gov.Record(PoolKey, OutcomeCrashBeforeReady)
		return false
	}
	e := &poolEntry{p: p, envs: spec.envs, claimed: make(chan struct{})}
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		pl.discard(p)
		return false
	}
	pl.members[p] = e
	pl.mu.Unlock()

	if why := pl.awaitReady(p); why != "" {
		pl.mu.Lock()
		delete(pl.members, p)
		closed := pl.closed
		pl.mu.Unlock()
		pl.discard(p)
		if !closed {
			pl.failed.Add(1)
			pl.log.Error("warm pool: child failed before ctrl/ready", "pid", p.pid, "reason", why, "exit", exitString(p))
			pl.s.gov.Record(PoolKey, OutcomeCrashBeforeReady)
		}
		return false
	}
	// Ready is the pool's success: it resets the backoff (failures stay in the
	// breaker's window).
	pl.s.gov.Record(PoolKey, OutcomeClean)
	pl.mu.Lock()
	if pl.closed || !pl.s.current(e.envs) {
		// Closed, or the keys changed while it started: the next
		// refill starts one with the keys in force.
		delete(pl.members, p)
		pl.mu.Unlock()
		pl.discard(p)
		return true
	}
	pl.idle = append(pl.idle, e)
	pl.rehearseHeadLocked()
	pl.wg.Add(1) // the refill loop's own count is held, so this cannot race Wait
	pl.mu.Unlock()
	go pl.watchIdle(e)
	return true
}

// awaitReady waits for p's ctrl/ready within SpawnReady. It returns "" when p
// is ready, else why not (p is then still to be discarded).
func (pl *pool) awaitReady(p *proc) string {
	t := time.NewTimer(pl.s.cfg.SpawnReady)
	defer t.Stop()
	select {
	case f, ok := <-p.frames:
		switch {
		case !ok:
			return "control-out closed before ctrl/ready: " + p.readErr.Error()
		case f.Method != api.MethodReady:
			return "first frame is " + f.Method + ", want " + api.MethodReady
		}
		p.ready.Store(true)
		return ""
	case <-p.done:
		return "exited before ctrl/ready"
	case <-t.C:
		return "no ctrl/ready within " + pl.s.cfg.SpawnReady.String()
	case <-pl.ctx.Done():
		return "pool closed"
	}
}

// watchIdle waits for an idle child to be taken or to die. A death while idle
// is a failure for the governor, and the pool refills.
func (pl *pool) watchIdle(e *poolEntry) {
	defer pl.wg.Done()
	select {
	case <-e.claimed:
		return
	case <-e.p.done:
	}
	pl.mu.Lock()
	_, member := pl.members[e.p]
	delete(pl.members, e.p)
	for i, x := range pl.idle {
		if x == e {
			pl.idle = append(pl.idle[:i], pl.idle[i+1:]...)
			break
		}
	}
	pl.rehearseHeadLocked()
	closed := pl.closed
	pl.mu.Unlock()
	if !member || closed {
		return // drained with the pool
	}
	e.p.release()
	pl.replaced.Add(1)
	pl.log.Warn("warm pool: idle child died; replacing it", "pid", e.p.pid, "exit", e.p.exitStatus().String())
	pl.s.gov.Record(PoolKey, OutcomeFailure)
	pl.wake()
}

// retireStale retires every idle child started with an environment no
// longer in force (Supervisor.SetKeyEnv); the refill loop replaces them. A
// child still starting is checked once it is ready (startOne).
func (pl *pool) retireStale() {
	if pl == nil {
		return
	}
	pl.mu.Lock()
	for _, e := range slices.Clone(pl.idle) {
		if !pl.s.current(e.envs) {
			pl.retireLocked(e)
		}
	}
	pl.rehearseHeadLocked()
	pl.mu.Unlock()
	pl.wake()
}

// rehearseHeadLocked sends the head of idle ctrl/rehearse if the pool's
// children rehearse (Config.PoolRehearse) and it has not been sent it yet.
// The caller holds mu. The frame is a few bytes into a pipe its child reads
// and nothing else has written to since its start, so the write does not
// wait; a child that died meanwhile fails it, and its watcher moves the next
// one up.
func (pl *pool) rehearseHeadLocked() {
	if !pl.s.cfg.PoolRehearse || len(pl.idle) == 0 || pl.idle[0].rehearsed {
		return
	}
	e := pl.idle[0]
	e.rehearsed = true
	if err := e.p.w.Send(api.MethodRehearse, 0, nil); err != nil {
		pl.log.Debug("warm pool: ctrl/rehearse not sent", "pid", e.p.pid, "err", err)
	}
}

// retireLocked takes the idle child e out of the pool (its watcher returns)
// and discards it in the background, counted in wg. The caller holds mu, and
// the pool is not closed (it has members).
func (pl *pool) retireLocked(e *poolEntry) {
	delete(pl.members, e.p)
	pl.idle = slices.DeleteFunc(pl.idle, func(x *poolEntry) bool { return x == e })
	close(e.claimed)
	pl.wg.Add(1) // the refill loop's own count is held, so this cannot race Wait
	go func() {
		defer pl.wg.Done()
		pl.log.Info("warm pool: idle child retired: the children's keys changed", "pid", e.p.pid)
		pl.discard(e.p)
		pl.wake()
	}()
}

// discard SIGKILLs a child that will not serve and waits for its reap,
// bounded by ReapGrace.
func (pl *pool) discard(p *proc) {
	p.killed.Store(true)
	p.signal(sigKill)
	p.release()
	if !waitAll([]*proc{p}, pl.s.cfg.ReapGrace) && pl.s.unreapable(p) {
		pl.log.Error("warm pool: process would not reap", "pid", p.pid)
	}
}

// close stops refills and SIGKILLs every child of the pool: idle ones hold no
// work, so a drain never waits on them. It is idempotent; wait collects them.
func (pl *pool) close() {
	if pl == nil {
		return
	}
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return
	}
	pl.closed = true
	procs := make([]*proc, 0, len(pl.members))
	for p := range pl.members {
		procs = append(procs, p)
	}
	pl.members, pl.idle = nil, nil
	pl.mu.Unlock()
	pl.cancel()
	for _, p := range procs {
		p.killed.Store(true)
		p.signal(sigKill)
		p.release()
	}
	if len(procs) > 0 {
		pl.log.Info("warm pool: drained", "children", len(procs))
	}
}

// wait blocks until the refill loop has stopped and every child of the pool is
// reaped, or ctx ends.
func (pl *pool) wait(ctx context.Context) error {
	if pl == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { pl.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stats returns the pool's counters.
func (pl *pool) stats() PoolStats {
	if pl == nil {
		return PoolStats{}
	}
	pl.mu.Lock()
	st := PoolStats{Size: pl.size, Idle: len(pl.idle), Starting: len(pl.members) - len(pl.idle)}
	pl.mu.Unlock()
	st.Assigned, st.Cold = pl.assigned.Load(), pl.cold.Load()
	st.Replaced, st.Failed = pl.replaced.Load(), pl.failed.Load()
	st.Breaker = pl.s.gov.Breaker(PoolKey)
	st.BreakerOpen = st.Breaker.Open
	return st
}

// idlePIDs returns the pids of the idle children, oldest first.
func (pl *pool) idlePIDs() []int {
	if pl == nil {
		return nil
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out := make([]int, len(pl.idle))
	for i, e := range pl.idle {
		out[i] = e.p.pid
	}
	return out
}

// Pool returns the warm pool's state; the zero PoolStats when there is none.
func (s *Supervisor) Pool() PoolStats { return s.pool.stats() }

func exitString(p *proc) string {
	if p.exited() {
		return p.exitStatus().String()
	}
	return "not reaped"
}
