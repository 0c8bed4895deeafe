package server

import (
	"sync"
	"time"
)

// Drainer is the service's one drain path: the first SIGTERM and a2a.Drain both
// call Start, and the serve loop runs the drain when Requested closes. It is
// safe for concurrent use; create it with NewDrainer.
type Drainer struct {
	def    time.Duration
	refuse func()

	mu      sync.Mutex // guards started, budget
	started time.Time
	budget  time.Duration
	req     chan struct{} // closed by the first Start
}

// NewDrainer returns a drainer whose default budget is def (--drain-timeout).
// refuse, if not nil, is called inside the first Start before it returns, so
// new work is refused from the moment a drain is acknowledged.
func NewDrainer(def time.Duration, refuse func()) *Drainer {
	return &Drainer{def: def, refuse: refuse, req: make(chan struct{})}
}

// Start begins the drain with budget (the default when budget <= 0) and
// reports whether this call began it. Later calls change nothing: a drain is
// never hurried or restarted.
func (d *Drainer) Start(budget time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.started.IsZero() {
		return false
	}
	if budget <= 0 {
		budget = d.def
	}
	d.started, d.budget = time.Now(), budget
	if d.refuse != nil {
		d.refuse()
	}
	close(d.req)
	return true
}

// Requested is closed when the drain begins.
func (d *Drainer) Requested() <-chan struct{} { return d.req }

// State reports whether the drain has begun, when, and its budget.
func (d *Drainer) State() (draining bool, started time.Time, budget time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.started.IsZero(), d.started, d.budget
}

// Draining reports whether the drain has begun.
func (d *Drainer) Draining() bool {
	draining, _, _ := d.State()
	return draining
}

// LameDuck is the operator's readiness switch (a2a.LameDuck): while on,
// /readyz reports not ready and nothing else changes. Safe for concurrent use;
// create it with NewLameDuck (the zero value is ready since the zero time).
type LameDuck struct {
	mu    sync.Mutex // guards on, since
	on    bool
	since time.Time
}

// NewLameDuck returns a switch that is ready from now.
func NewLameDuck() *LameDuck { return &LameDuck{since: time.Now()} }

// Set makes the service ready or not and returns the readiness and since when
// it has held (unchanged when the call changes nothing).
func (l *LameDuck) Set(ready bool) (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on == ready { // the state changes
		l.on, l.since = !ready, time.Now()
	}
	return !l.on, l.since
}

// Ready reports whether the operator left the service ready.
func (l *LameDuck) Ready() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.on
}
