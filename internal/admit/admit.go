// Package admit is agentd's admission control for the whole service: it
// bounds the runs (live subagent trees) and the live subagent processes
// across every tree, queues the runs past those bounds in a bounded queue
// ordered by priority and fair across callers, and sheds what the queue
// cannot hold with a hint of when to come back.
//
// # Slots
//
// A run holds one run slot and one process slot from the moment it is
// dispatched until its task ends, whatever its turns and its provider: the
// process slot is its root subagent's (a run's turns are sequential, so it
// never has two roots at once; a run on a remote peer holds it too, which
// errs on the safe side). Every nested subagent that runs as a local process
// takes a process slot of its own at the subagent.spawn chokepoint
// (TryAcquire) and gives it back once it is reaped (Release); a nested spawn
// that finds none free is refused at once, never held. So the number of live
// subagent processes never passes MaxLive, and a run is dispatched only when
// both a run slot and a process slot are free.
//
// # The queue
//
// A run that finds no free slot waits in the queue, if the queue has room
// (QueueCapacity in all, at most QueuePerCaller of them from one caller);
// otherwise it is shed with a *ShedError carrying a retry-after estimate.
// When a slot frees, the queue picks the next run in three steps:
//
//  1. Fair shares: with A callers active (running or queued), a caller's
//     share is ceil(MaxRuns/A). Only callers below their share are
//     eligible while one of them waits; when none is, every waiting caller
//     is (the queue never leaves a slot idle while a run waits).
//  2. Priority: the highest priority an eligible caller has waiting.
//  3. Round-robin: among the eligible callers waiting at that priority, the
//     one served longest ago; its oldest run at that priority.
//
// Priorities come from the caller (Policy caps what each caller may ask
// for). A queued run's position (Ticket.Position) is an estimate: the order
// these steps would serve the queue in if nothing else arrived and no run
// ended.
//
// Lowering a bound never stops anything that runs; runs are dispatched again
// once the usage is below the new bound.
package admit

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Bounds are the service's admission bounds. The zero value is not valid
// (Validate): Derive computes them from a memory limit.
type Bounds struct {
	MaxRuns       int // runs (live subagent trees) at once; at least 1
	MaxLive       int // live subagent processes across the service, run roots included; at least MaxRuns
	QueueCapacity int // runs waiting for a slot; 0: none wait, a run that finds no slot is shed
}

// Validate checks the bounds on their own.
func (b Bounds) Validate() error {
	switch {
	case b.MaxRuns < 1:
		return fmt.Errorf("admit: max_live_runs %d: must be at least 1", b.MaxRuns)
	case b.MaxLive < b.MaxRuns:
		return fmt.Errorf("admit: max_live_subagents %d: must be at least max_live_runs (%d): every run holds a process slot for its root", b.MaxLive, b.MaxRuns)
	case b.QueueCapacity < 0:
		return fmt.Errorf("admit: queue_capacity %d: must not be negative", b.QueueCapacity)
	}
	return nil
}

// within checks b against the hard ceiling c.
func (b Bounds) within(c Bounds) error {
	switch {
	case b.MaxRuns > c.MaxRuns:
		return &CeilingError{Name: "max_live_runs", Value: b.MaxRuns, Ceiling: c.MaxRuns}
	case b.MaxLive > c.MaxLive:
		return &CeilingError{Name: "max_live_subagents", Value: b.MaxLive, Ceiling: c.MaxLive}
	case b.QueueCapacity > c.QueueCapacity:
		return &CeilingError{Name: "queue_capacity", Value: b.QueueCapacity, Ceiling: c.QueueCapacity}
	}
	return nil
}

// CeilingError refuses a bound above its hard ceiling. Name is the bound's
// snake_case name, so callers can name the setting.
type CeilingError struct {
	Name           string
	Value, Ceiling int
}

func (e *CeilingError) Error() string {
	return fmt.Sprintf("admit: %s %d is above its ceiling of %d (derived from the memory limit)", e.Name, e.Value, e.Ceiling)
}

// Config configures a Controller. Zero fields take their defaults.
type Config struct {
	Bounds
	// Ceiling is what SetBounds may raise the bounds to; each zero field is
	// the initial bound's value (no raising). It must not be below Bounds.
	Ceiling Bounds
	// QueuePerCaller is how many queued runs one caller may hold; default
	// half of QueueCapacity (rounded up), so no caller can fill the queue.
	QueuePerCaller int
	// RetryMin and RetryMax bound the retry-after hint; defaults 1s and 5m.
	RetryMin, RetryMax time.Duration
	// RunEstimate is the run length the hint assumes until runs have ended;
	// default 10s. After that it is a moving average of ended runs.
	RunEstimate time.Duration
	// Clock reads the time; default time.Now.
	Clock func() time.Time
	// Memory is the memory gate (memory.go); the zero value turns it off.
	Memory MemoryConfig
}

// Shedding reasons, as ShedError.Reason and Stats.Shed name them.
const (
	ReasonQueueFull       = "queue_full"        // the queue holds QueueCapacity runs
	ReasonCallerQueueFull = "caller_queue_full" // the caller holds QueuePerCaller queued runs
	ReasonClosed          = "closed"            // the service drains: nothing is admitted
	// ReasonMemory (memory.go): the memory in use leaves no room for a message.
)

// ErrShed is the error every shed request wraps: the service is at capacity.
var ErrShed = errors.New("admit: service at capacity")

// ShedError is a request the service did not take: no slot, no room in the
// queue. The client may come back after RetryAfter.
type ShedError struct {
	Reason     string        // ReasonQueueFull, ReasonCallerQueueFull, ReasonClosed or ReasonMemory
	RetryAfter time.Duration // whole seconds, at least RetryMin
	Queued     int           // runs queued when it was shed
}

func (e *ShedError) Error() string {
	return fmt.Sprintf("%v (%s): retry after %ds", ErrShed, e.Reason, e.RetryAfterSeconds())
}

// Unwrap makes errors.Is(err, ErrShed) hold.
func (e *ShedError) Unwrap() error { return ErrShed }

// RetryAfterSeconds is RetryAfter in whole seconds, as Retry-After carries it.
func (e *ShedError) RetryAfterSeconds() int {
	return int(math.Ceil(e.RetryAfter.Seconds()))
}

// Controller is the service's admission control. It is safe for concurrent
// use; create it with New (the zero value is not usable).
type Controller struct {
	cfg Config

	mu       sync.Mutex // guards every field below and every Ticket's state
	b        Bounds
	ceiling  Bounds
	runs     int // run slots in use
	live     int // process slots in use: one per run, one per nested subagent
	queued   int
	callers  map[string]*caller // callers with a running or queued run
	rings    [High + 1][]*caller
	closed   bool
	closedCh chan struct{}
	freed    chan struct{} // Freed (shared.go)
	// sharedQueued, when set, counts the runs waiting in a queue shared
	// with other processes (SetSharedQueue, shared.go).
	sharedQueued func() (map[Priority]int, error)

	pos       map[*Ticket]int // queued runs' positions; nil when it must be computed again (positionsLocked)
	runEst    time.Duration   // moving average of run lengths
	ended     int64
	admitted  int64
	cancelled int64
	refused   int64
	shed      map[string]int64

	sample   Sample // the last memory sample (Observe)
	reserved uint64 // the running runs' and nested subagents' memory reservations
	held     uint64 // the front's reservations for messages being read, or read since the last sample
	// fresh holds the reservations of the runs and nested subagents
	// admitted since the last sample ([0]) and the one before it ([1]):
	// their children may not be in the sample yet (beyondLocked).
	fresh [2]uint64
	// beyond counts the runs and nested subagents admitted past the
	// count bounds (MemoryConfig.Beyond).
	beyond int64
	// lingering is the part of held whose requests were answered: it goes
	// at the next sample.
	lingering uint64
}

// caller is one caller's share of the queue.
type caller struct {
	name    string
	running int
	queued  int
	q       [High + 1][]*Ticket // FIFO per priority
}

// New returns a controller.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Bounds.Validate(); err != nil {
		return nil, err
	}
	c := cfg.Ceiling
	if c.MaxRuns == 0 {
		c.MaxRuns = cfg.MaxRuns
	}
	if c.MaxLive == 0 {
		c.MaxLive = cfg.MaxLive
	}
	if c.QueueCapacity == 0 {
		c.QueueCapacity = cfg.QueueCapacity
	}
	if err := cfg.Bounds.within(c); err != nil {
		return nil, err
	}
	if cfg.QueuePerCaller < 0 {
		return nil, fmt.Errorf("admit: queue_per_caller %d: must not be negative", cfg.QueuePerCaller)
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = time.Second
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(5*time.Minute, cfg.RetryMin)
	}
	if cfg.RunEstimate <= 0 {
		cfg.RunEstimate = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	cfg.Memory.defaults()
	return &Controller{
		cfg:      cfg,
		b:        cfg.Bounds,
		ceiling:  c,
		callers:  map[string]*caller{},
		closedCh: make(chan struct{}),
		freed:    make(chan struct{}, 1),
		shed:     map[string]int64{ReasonQueueFull: 0, ReasonCallerQueueFull: 0, ReasonClosed: 0, ReasonMemory: 0},
	}, nil
}

// Ticket is one run's place in admission: queued until Ready closes, then
// holding its run slot and its root's process slot until Done. Tickets come
// from Enqueue (the zero value is not usable); their methods are safe for
// concurrent use.
type Ticket struct {
	c       *Controller
	caller  string
	prio    Priority
	ready   chan struct{}
	state   ticketState // guarded by c.mu
	started time.Time   // guarded by c.mu
	cost    uint64      // the memory the run reserves while it runs
}

type ticketState int8

const (
	stateQueued ticketState = iota
	stateRunning
	stateEnded // done, or cancelled while queued
)

// Enqueue asks for a run for caller at priority prio (the caller's effective
// priority, see Policy). It returns a ticket whose Ready channel is already
// closed when a slot was free, or a queued ticket, or a *ShedError when the
// queue has no room (or the controller is closed). The caller must end every
// ticket with Done.
func (c *Controller) Enqueue(callerName string, prio Priority) (*Ticket, error) {
	return c.EnqueueMessage(callerName, prio, 0)
}

// EnqueueMessage is Enqueue for a run whose message has messageBytes: the run
// reserves ChildCost plus ChildFactor times those bytes of memory while it
// runs, and waits in the queue while the memory gate has no room for that.
func (c *Controller) EnqueueMessage(callerName string, prio Priority, messageBytes int64) (*Ticket, error) {
	if prio < Low || prio > High {
		prio = Normal
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, c.shedLocked(ReasonClosed)
	}
	c.pos = nil
	cq := c.callers[callerName]
	cost := c.runCost(messageBytes)
	if c.queued == 0 && c.canStartLocked(cost) {
		// The fast path: a slot is free and nobody waits for it.
		if cq == nil {
			cq = &caller{name: callerName}
			c.callers[callerName] = cq
		}
		t := &Ticket{c: c, caller: callerName, prio: prio, ready: admittedAtOnce, state: stateRunning, started: c.cfg.Clock(), cost: cost}
		c.startLocked(cq, cost)
		return t, nil
	}
	if !c.canStartLocked(cost) {
		if c.queued >= c.b.QueueCapacity {
			return nil, c.shedLocked(ReasonQueueFull)
		}
		if cq != nil && cq.queued >= c.perCallerLocked() {
			return nil, c.shedLocked(ReasonCallerQueueFull)
		}
	}
	if cq == nil {
		cq = &caller{name: callerName}
		c.callers[callerName] = cq
	}
	t := &Ticket{c: c, caller: callerName, prio: prio, ready: make(chan struct{}), cost: cost}
	if len(cq.q[prio]) == 0 {
		c.rings[prio] = append(c.rings[prio], cq)
	}
	cq.q[prio] = append(cq.q[prio], t)
	cq.queued++
	c.queued++
	c.dispatchLocked()
	return t, nil
}

// freeLocked reports whether a run could start now for its slots: within
// the bounds, or past them (up to the ceiling) while the memory gate admits
// beyond them (beyondLocked decides each run).
func (c *Controller) freeLocked() bool {
	if c.closed {
		return false
	}
	if c.runs < c.b.MaxRuns && c.live < c.b.MaxLive {
		return true
	}
	return c.beyondOnLocked() && c.runs < c.ceiling.MaxRuns && c.live < c.ceiling.MaxLive
}

// canStartLocked reports whether a run reserving cost bytes may start now:
// a slot within the bounds and room for its reservation (runFitsLocked), or,
// within the bounds or past them, room in the memory measured
// (beyondLocked).
func (c *Controller) canStartLocked(cost uint64) bool {
	if !c.freeLocked() {
		return false
	}
	if c.runs < c.b.MaxRuns && c.live < c.b.MaxLive && c.runFitsLocked(cost) {
		return true
	}
	return c.beyondLocked(cost)
}

func (c *Controller) perCallerLocked() int {
	if c.cfg.QueuePerCaller > 0 {
		return c.cfg.QueuePerCaller
	}
	return max(1, (c.b.QueueCapacity+1)/2)
}

func (c *Controller) shedLocked(reason string) *ShedError {
	c.shed[reason]++
	return &ShedError{Reason: reason, RetryAfter: c.retryAfterLocked(), Queued: c.queued}
}

// retryAfterLocked estimates when a run sent now could start: the queue
// ahead of it (and itself) run MaxRuns at a time, each as long as the
// average run, in whole seconds within [RetryMin, RetryMax].
func (c *Controller) retryAfterLocked() time.Duration { return c.retryAfterForLocked(c.queued) }

// retryAfterForLocked is retryAfterLocked for a queue of queued runs.
func (c *Controller) retryAfterForLocked(queued int) time.Duration {
	est := c.cfg.RunEstimate
	if c.ended > 0 {
		est = c.runEst
	}
	d := time.Duration(float64(est) * float64(queued+1) / float64(max(c.b.MaxRuns, 1)))
	d = min(max(d, c.cfg.RetryMin), c.cfg.RetryMax)
	return time.Duration(math.Ceil(d.Seconds())) * time.Second
}

// dispatchLocked starts queued runs while slots are free, and wakes a
// shared queue's owner (Freed) when one is left.
func (c *Controller) dispatchLocked() {
	defer func() {
		if c.freeLocked() {
			c.signalFreedLocked()
		}
	}()
	for c.queued > 0 && c.freeLocked() {
		t := c.pickLocked()
		if !c.canStartLocked(t.cost) {
			return // the next sample, or an end, dispatches it
		}
		c.unqueueLocked(t, true)
		t.state = stateRunning
		t.started = c.cfg.Clock()
		c.startLocked(c.callers[t.caller], t.cost)
		close(t.ready)
	}
}

// startLocked counts a run of cq as holding its slots and cost bytes of
// memory.
func (c *Controller) startLocked(cq *caller, cost uint64) {
	c.pos = nil
	c.reserved += cost
	c.fresh[0] += cost
	if c.runs >= c.b.MaxRuns || c.live >= c.b.MaxLive {
		c.beyond++
	}
	cq.running++
	c.runs++
	c.live++
	c.admitted++
}

// admittedAtOnce is the Ready channel of every ticket admitted without
// waiting: closed from the start.
var admittedAtOnce = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// pickLocked chooses the next run (see the package doc): fair shares, then
// priority, then round-robin. The queue is not empty.
func (c *Controller) pickLocked() *Ticket {
	share := (c.b.MaxRuns + len(c.callers) - 1) / len(c.callers)
	for _, fair := range [...]bool{true, false} {
		for _, p := range priorities {
			for _, cq := range c.rings[p] {
				if fair && cq.running >= share {
					continue
				}
				return cq.q[p][0]
			}
		}
	}
	panic("admit: pick from an empty queue")
}

// unqueueLocked takes t out of the queue. When served (t is being
// dispatched) and its caller has more waiting at t's priority, the caller
// moves to the back of that priority's round-robin; a cancel keeps its place.
func (c *Controller) unqueueLocked(t *Ticket, served bool) {
	c.pos = nil
	cq := c.callers[t.caller]
	q := cq.q[t.prio]
	i := 0
	for q[i] != t {
		i++
	}
	cq.q[t.prio] = append(q[:i:i], q[i+1:]...)
	cq.queued--
	c.queued--
	if len(cq.q[t.prio]) > 0 && !served {
		return
	}
	ring := c.rings[t.prio]
	j := 0
	for ring[j] != cq {
		j++
	}
	ring = append(ring[:j:j], ring[j+1:]...)
	if len(cq.q[t.prio]) > 0 {
		ring = append(ring, cq)
	}
	c.rings[t.prio] = ring
}

// forgetLocked drops a caller with nothing running or queued.
func (c *Controller) forgetLocked(cq *caller) {
	if cq.running == 0 && cq.queued == 0 {
		delete(c.callers, cq.name)
	}
}

// Ready is closed when the run may start: it holds its slots from then on.
func (t *Ticket) Ready() <-chan struct{} { return t.ready }

// Priority is the priority the run was queued at.
func (t *Ticket) Priority() Priority { return t.prio }

// Position is the run's place in the queue (1 is next, an estimate: see the
// package doc), or 0 once it has started or ended.
func (t *Ticket) Position() int {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.state != stateQueued {
		return 0
	}
	return c.positionsLocked()[t]
}

// positionsLocked returns every queued run's position: the order the queue
// would serve them in if nothing else arrived and no run ended, picked as
// pickLocked picks (the fair shares counting what it has served so far,
// then priority, then round-robin). It is cached until the queue, the runs
// or the bounds change.
func (c *Controller) positionsLocked() map[*Ticket]int {
	if c.pos != nil {
		return c.pos
	}
	pos := make(map[*Ticket]int, c.queued)
	running := make(map[*caller]int, len(c.callers))
	next := make(map[*caller]*[High + 1]int, len(c.callers))
	for _, cq := range c.callers {
		running[cq] = cq.running
		next[cq] = new([High + 1]int)
	}
	var rings [High + 1][]*caller
	for _, p := range priorities {
		rings[p] = append([]*caller(nil), c.rings[p]...)
	}
	share := (c.b.MaxRuns + len(c.callers) - 1) / max(len(c.callers), 1)
	for n := 1; n <= c.queued; n++ {
	pick:
		for _, fair := range [...]bool{true, false} {
			for _, p := range priorities {
				for j, cq := range rings[p] {
					if fair && running[cq] >= share {
						continue
					}
					i := &next[cq][p]
					pos[cq.q[p][*i]] = n
					*i++
					running[cq]++
					rings[p] = append(rings[p][:j:j], rings[p][j+1:]...)
					if *i < len(cq.q[p]) {
						rings[p] = append(rings[p], cq)
					}
					break pick
				}
			}
		}
	}
	c.pos = pos
	return pos
}

// Cancel takes a queued run out of the queue and reports whether it was
// still queued (it then never starts, and the ticket is ended). False means
// it had started (or ended): the caller still ends it with Done.
func (t *Ticket) Cancel() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.state != stateQueued {
		return false
	}
	c.unqueueLocked(t, false)
	t.state = stateEnded
	c.cancelled++
	c.forgetLocked(c.callers[t.caller])
	return true
}

// Done ends the ticket: a started run gives back its slots (and the queue
// moves on), a queued one leaves the queue. It is idempotent.
func (t *Ticket) Done() {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch t.state {
	case stateEnded:
		return
	case stateQueued:
		c.unqueueLocked(t, false)
		c.cancelled++
	case stateRunning:
		c.pos = nil
		cq := c.callers[t.caller]
		cq.running--
		c.runs--
		c.live--
		c.reserved -= t.cost
		d := c.cfg.Clock().Sub(t.started)
		if c.ended == 0 {
			c.runEst = d
		} else {
			c.runEst = (4*c.runEst + d) / 5
		}
		c.ended++
	}
	t.state = stateEnded
	c.forgetLocked(c.callers[t.caller])
	c.dispatchLocked()
}

// TryAcquire takes a process slot for a nested subagent, and reports whether
// there was one. It never waits. (It implements the supervisor's
// ProcessBudget.)
func (c *Controller) TryAcquire() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cost := c.cfg.Memory.ChildCost
	within := c.live < c.b.MaxLive && c.roomLocked(cost)
	if !within && !(c.beyondOnLocked() && c.live < c.ceiling.MaxLive && c.beyondLocked(cost)) {
		c.refused++
		return false
	}
	if c.live >= c.b.MaxLive {
		c.beyond++
	}
	c.live++
	c.reserved += cost
	c.fresh[0] += cost
	return true
}

// Release gives back a process slot TryAcquire took, once the subagent's
// process is reaped.
func (c *Controller) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live > 0 {
		c.live--
		c.reserved -= min(c.reserved, c.cfg.Memory.ChildCost)
	}
	c.dispatchLocked()
}

// Reclaim takes back a process slot over the bounds: the one a suspended
// tree's root gave back (Release) while it waited for an answer, when its
// run ends before the tree resumed, so the run's Done balances. (It
// implements the supervisor's SlotReclaimer.)
func (c *Controller) Reclaim() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live++
	c.reserved += c.cfg.Memory.ChildCost
}

// Close stops admission for a drain: nothing more is dispatched and every new
// request is shed (ReasonClosed). Queued runs stay queued; their owners see
// Closed and end them. Running runs keep their slots until Done. It is
// idempotent.
func (c *Controller) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		close(c.closedCh)
	}
}

// Closed is closed by Close.
func (c *Controller) Closed() <-chan struct{} { return c.closedCh }

// Bounds returns the bounds in force and their hard ceiling.
func (c *Controller) Bounds() (cur, ceiling Bounds) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b, c.ceiling
}

// SetBounds replaces the bounds after checking them against each other and
// against the ceiling; an error changes nothing. Raised bounds dispatch
// queued runs at once; lowered ones stop nothing that runs.
func (c *Controller) SetBounds(b Bounds) error {
	if err := b.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := b.within(c.ceiling); err != nil {
		return err
	}
	c.b, c.pos = b, nil
	c.dispatchLocked()
	return nil
}

// Stats is a snapshot of admission, for operators and metrics.
type Stats struct {
	Bounds
	Ceiling Bounds
	Runs    int // run slots in use
	Live    int // process slots in use (runs' roots and nested subagents)
	Queued  int
	// QueuedBy counts the queued runs by priority name (low, normal, high).
	QueuedBy map[string]int
	Callers  int   // callers with a run running or queued
	Admitted int64 // runs dispatched
	// Cancelled counts runs that left the queue without starting.
	Cancelled int64
	// Refused counts nested spawns refused for want of a process slot.
	Refused int64
	// Shed counts requests shed, by reason; every reason is present.
	Shed       map[string]int64
	RetryAfter time.Duration // the hint a request shed now would get
	Closed     bool
}

// Stats returns a snapshot.
func (c *Controller) Stats() Stats {
	st, shared := c.statsOwn()
	if shared != nil {
		// Read outside the lock: a shared queue is a database's.
		if by, err := shared(); err == nil {
			for p, n := range by {
				st.Queued += n
				st.QueuedBy[p.String()] += n
			}
		}
	}
	return st
}

// statsOwn is Stats of this controller alone, and the shared queue's count
// to add, if any.
func (c *Controller) statsOwn() (Stats, func() (map[Priority]int, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{
		Bounds: c.b, Ceiling: c.ceiling, Runs: c.runs, Live: c.live, Queued: c.queued,
		QueuedBy: map[string]int{}, Callers: len(c.callers),
		Admitted: c.admitted, Cancelled: c.cancelled, Refused: c.refused,
		Shed: make(map[string]int64, len(c.shed)), RetryAfter: c.retryAfterLocked(), Closed: c.closed,
	}
	for _, p := range priorities {
		n := 0
		for _, cq := range c.rings[p] {
			n += len(cq.q[p])
		}
		st.QueuedBy[p.String()] = n
	}
	for k, v := range c.shed {
		st.Shed[k] = v
	}
	return st, c.sharedQueued
}
