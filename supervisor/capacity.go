package supervisor

// ProcessBudget is the service-wide bound on live subagent processes that the
// subagent.spawn chokepoint consults (package admit implements it; cmd
// injects it). Every nested subagent that will run as a local process takes
// one slot when it is admitted and gives it back once its process is reaped
// (or abandoned as unreapable); a spawn that finds no slot is refused with
// "spawn denied: service at capacity", never held. Roots take no slot here:
// whoever starts a tree holds its root's slot (admission holds one per run).
// Implementations are safe for concurrent use and never block.
type ProcessBudget interface {
	// TryAcquire takes a slot and reports whether there was one.
	TryAcquire() bool
	// Release gives back a slot TryAcquire took.
	Release()
}

// refuseCapacity is the chokepoint's refusal when the service-wide process
// bound is reached.
const refuseCapacity = "spawn denied: service at capacity"

// acquireSlot takes a process slot for a nested child admitted on provider;
// remote children run no process here and take none. It reports false when
// the budget is exhausted.
func (s *Supervisor) acquireSlot(child *node) bool {
	if s.cfg.Budget == nil || child.nest.remote {
		return true
	}
	if !s.cfg.Budget.TryAcquire() {
		return false
	}
	child.budgeted = true
	return true
}

// releaseSlot gives back the slot of an ended (or never started) node.
func (s *Supervisor) releaseSlot(n *node) {
	if n.budgeted {
		s.cfg.Budget.Release()
	}
}
