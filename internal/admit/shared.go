package admit

// A queue shared by several processes (replicas on one database) lives
// outside the Controller: the Controller still bounds this process's runs and
// processes, and the shared queue's owner asks it for a slot for each run it
// takes from that queue (TryStart), waking when one frees (Freed). Its own
// queue then holds only the runs of this process that cannot be shared (a
// rerun after a restart).

// TryStart takes a run slot and its root's process slot for caller at
// priority prio if both are free and nothing waits in this controller's own
// queue; it returns the running ticket (end it with Done), or nil, changing
// nothing. It never queues.
func (c *Controller) TryStart(callerName string, prio Priority) *Ticket {
	if prio < Low || prio > High {
		prio = Normal
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cost := c.runCost(0)
	if c.queued > 0 || !c.canStartLocked(cost) {
		return nil
	}
	cq := c.callers[callerName]
	if cq == nil {
		cq = &caller{name: callerName}
		c.callers[callerName] = cq
	}
	t := &Ticket{c: c, caller: callerName, prio: prio, ready: admittedAtOnce, state: stateRunning, started: c.cfg.Clock(), cost: cost}
	c.startLocked(cq, cost)
	return t
}

// Freed receives a value (coalesced) each time a slot may have freed: a run
// ended, a nested subagent's process slot came back, or the bounds changed.
// Every call returns the same channel.
func (c *Controller) Freed() <-chan struct{} { return c.freed }

// signalFreedLocked wakes Freed's receiver.
func (c *Controller) signalFreedLocked() {
	select {
	case c.freed <- struct{}{}:
	default:
	}
}

// QueueBounds returns how many runs a queue may hold in all and how many of
// them one caller may hold, under the bounds in force: the bounds a shared
// queue applies too.
func (c *Controller) QueueBounds() (capacity, perCaller int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.QueueCapacity, c.perCallerLocked()
}

// Shed counts a request a shared queue refused for reason (ReasonQueueFull,
// ReasonCallerQueueFull), queued runs being there already, and returns its
// *ShedError with the retry-after hint for a queue of that length.
func (c *Controller) Shed(reason string, queued int) *ShedError {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shed[reason]++
	return &ShedError{Reason: reason, RetryAfter: c.retryAfterForLocked(queued), Queued: queued}
}

// SetSharedQueue makes Stats count, beside this controller's own queue, the
// runs waiting in the queue shared with other processes, by priority, as
// queued reads them at each call (a read that fails adds nothing): the
// gauges of a replica then show the service's queue, where its own holds
// only the runs it cannot share.
func (c *Controller) SetSharedQueue(queued func() (map[Priority]int, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sharedQueued = queued
}
