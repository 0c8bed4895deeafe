package admit

import "fmt"

// # Memory
//
// Beside its slots, the controller holds the memory actually in use under the
// pod's limit (Config.Memory). A sampler (the supervisor's memory watch, at
// an interval) reports what is in use (Observe): the cgroup's working set, or
// the supervisor's RSS plus its children's PSS. Every admitted run reserves
// what its child may come to hold (ChildCost, plus ChildFactor times its
// message's bytes), every nested subagent ChildCost, both until they end; and
// the front reserves, before it reads a request's body, what decoding and
// storing its message may cost the supervisor (FrontFactor times its bytes),
// until the request is answered and a sample has been taken since (what the
// request left in the supervisor's heap is then in the sample). The memory
// the pod may come to hold is
//
//	max(in use, the supervisor's own + the runs' reservations) + the front's reservations
//
// and a run, a nested spawn or a message is admitted only if that plus its
// own reservation stays within the limit: a run that does not fit waits in
// the queue (or is shed when the queue is full), a nested spawn is refused, a
// message is shed with ReasonMemory before its body is read. So admission
// stops before the limit is reached, not after. Two exceptions keep the
// service live: a run is admitted for memory when no run holds a slot, and a
// message when no other message is being read.
//
// With Beyond set, the gate also admits more than the count bounds when the
// children are measured small: a run or a nested spawn that finds no slot
// within the bounds (or no room by the reservations) is admitted, up to the
// hard ceiling, when the memory measured leaves room for it and Headroom:
//
//	in use + fresh + the front's reservations + its own + Headroom <= limit
//
// where fresh is what the runs and nested subagents admitted since the
// sample before the last one reserved (their children may not be in the
// samples yet). Headroom is room for the live children to grow between
// samples; a child that grows past what the pod holds is the supervisor's
// memory policy's (it stops the child furthest over its fair share).

// Message byte factors, measured on agentd's binary (docs/admission.md):
// 24 concurrent 3 MB messages took the supervisor's RSS to 696 MiB (10 times
// their bytes each: the body, its decoding, the task's snapshot and its
// store's encoding; one message alone, 28 times, its heap doubling from a
// small start), and a child carrying one held 33.5 MiB private against 2.8
// idle (11 times).
const (
	// MessageFrontFactor is what the front reserves per byte of a request
	// body before reading it: the supervisor's 10 with its margin.
	MessageFrontFactor = 16
	// MessageChildFactor is what a run reserves per byte of its message,
	// beside ChildCost: the child's 11 with its margin.
	MessageChildFactor = 12
	// MessageReserveMin is the smallest body the front reserves for: a
	// smaller request (a tasks/get, an operator's call, a short message)
	// costs the supervisor what its reserve already holds room for, and is
	// never shed for memory.
	MessageReserveMin = 64 << 10
)

// ReasonMemory sheds a message when the memory in use, with what is admitted,
// leaves no room for it.
const ReasonMemory = "memory"

// MemoryConfig is the memory gate of a Controller. The zero value turns it
// off (only the slots bound the service).
type MemoryConfig struct {
	// Limit is what the pod's memory must stay within, in bytes; 0: no gate.
	Limit uint64
	// ChildCost is reserved per run and per nested subagent; default
	// ChildCost.
	ChildCost uint64
	// FrontFactor and ChildFactor are what a message reserves per byte, in
	// the supervisor while it is read and in the run's child; defaults
	// MessageFrontFactor and MessageChildFactor.
	FrontFactor, ChildFactor uint64
	// Beyond admits runs and nested subagents past the count bounds, up to
	// the ceiling, while the memory measured leaves room for them and
	// Headroom (see the package doc's Memory).
	Beyond bool
	// Headroom is the memory admission past the bounds leaves free for the
	// live children to grow; default HeadroomFor(Limit).
	Headroom uint64
}

// HeadroomShare and HeadroomMin set the default Headroom,
// max(HeadroomMin, limit/HeadroomShare): for a 1 GiB pod 64 MiB, room for
// 300 live children to grow by about 200 KiB each between two samples
// (figure 9's pod row: with limit/32 the gate filled a real 1 GiB cgroup
// to a working set of 992 MiB, with limit/16 to 960; the store's page
// cache, which the kernel reclaims first, fills the rest of the charge
// either way); for a small pod 20 MiB (at 160 MiB,
// with 10 MiB, the e2e burst of TestMemoryLimitHoldsPastTheBounds peaked at
// 148 to 161 MiB under load; with 20, 137 to 143).
const (
	HeadroomShare = 16
	HeadroomMin   = 20 * MiB
)

// HeadroomFor is the default Headroom for a limit.
func HeadroomFor(limit uint64) uint64 { return max(HeadroomMin, limit/HeadroomShare) }

func (m *MemoryConfig) defaults() {
	if m.ChildCost == 0 {
		m.ChildCost = ChildCost
	}
	if m.FrontFactor == 0 {
		m.FrontFactor = MessageFrontFactor
	}
	if m.ChildFactor == 0 {
		m.ChildFactor = MessageChildFactor
	}
	if m.Headroom == 0 {
		m.Headroom = HeadroomFor(m.Limit)
	}
}

// Sample is one reading of the memory in use.
type Sample struct {
	Total uint64 // the pod's: the cgroup's working set, or the supervisor's RSS plus its children's PSS
	Self  uint64 // the supervisor's own RSS
}

// MemoryStats is the memory gate's state, in bytes.
type MemoryStats struct {
	Limit    uint64 // 0: no gate
	InUse    uint64 // the last sample's total
	Self     uint64 // the last sample's supervisor RSS
	Reserved uint64 // the runs' and nested subagents' reservations
	Held     uint64 // the front's reservations for messages being read, or read since the last sample
	Estimate uint64 // what the gate counts as taken: max(InUse, Self+Reserved) + Held
	// Fresh is what the runs and nested subagents admitted since the
	// sample before the last reserved; Measured is InUse + Fresh + Held,
	// what admission past the bounds counts as taken.
	Fresh, Measured uint64
	Headroom        uint64 // left free by admission past the bounds; 0 when it is off
	// Beyond counts the runs and nested subagents admitted past the count
	// bounds.
	Beyond int64
}

// Observe records a sample of the memory in use and dispatches the queued
// runs it leaves room for.
func (c *Controller) Observe(s Sample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sample = s
	c.held -= c.lingering
	c.lingering = 0
	c.fresh[1], c.fresh[0] = c.fresh[0], 0
	c.dispatchLocked()
}

// estimateLocked is the memory the pod may come to hold with what is
// admitted (see the package doc's Memory).
func (c *Controller) estimateLocked() uint64 {
	return max(c.sample.Total, c.sample.Self+c.reserved) + c.held
}

// roomLocked reports whether cost more bytes fit under the limit.
func (c *Controller) roomLocked(cost uint64) bool {
	return c.cfg.Memory.Limit == 0 || c.estimateLocked()+cost <= c.cfg.Memory.Limit
}

// beyondOnLocked reports whether the gate may admit past the count bounds:
// it is on and has a sample to measure by.
func (c *Controller) beyondOnLocked() bool {
	return c.cfg.Memory.Beyond && c.cfg.Memory.Limit > 0 && c.sample.Total > 0
}

// measuredLocked is the memory the pod holds by the last sample, with what
// was admitted since the one before and the front's reservations.
func (c *Controller) measuredLocked() uint64 {
	return c.sample.Total + c.fresh[0] + c.fresh[1] + c.held
}

// beyondLocked reports whether cost more bytes fit in the memory measured,
// Headroom left free (admission past the count bounds).
func (c *Controller) beyondLocked(cost uint64) bool {
	return c.beyondOnLocked() && c.measuredLocked()+cost+c.cfg.Memory.Headroom <= c.cfg.Memory.Limit
}

// runFitsLocked reports whether a run reserving cost may start for memory:
// it fits, or no run holds a slot (so the service is never stuck).
func (c *Controller) runFitsLocked(cost uint64) bool {
	return c.runs == 0 || c.roomLocked(cost)
}

// runCost is what a run whose message has messageBytes reserves.
func (c *Controller) runCost(messageBytes int64) uint64 {
	return c.cfg.Memory.ChildCost + uint64(max(messageBytes, 0))*c.cfg.Memory.ChildFactor
}

// ReserveMessage reserves, before a request's body of n bytes is read, what
// decoding and storing its message may cost the supervisor. It returns the
// function that gives the reservation back once the request is answered
// (idempotent; the reservation lingers until the next sample, Observe, which
// sees what the request left behind), or a *ShedError with ReasonMemory when the memory in use and
// admitted leaves no room for it (while another message is being read).
// With Beyond, a body the runs' reservations leave no room for is still
// read when the memory measured does (beyondLocked): the runs it would
// start are admitted by that measure too, so the front must not refuse
// what the gate would admit.
func (c *Controller) ReserveMessage(n int64) (release func(), err error) {
	if c.cfg.Memory.Limit == 0 || n < MessageReserveMin {
		return func() {}, nil
	}
	cost := uint64(n) * c.cfg.Memory.FrontFactor
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held > 0 && !c.roomLocked(cost) && !c.beyondLocked(cost) {
		return nil, c.shedLocked(ReasonMemory)
	}
	c.held += cost
	done := false
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !done {
			done = true
			c.lingering += cost
		}
	}, nil
}

// MemoryStats returns the memory gate's state.
func (c *Controller) MemoryStats() MemoryStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := MemoryStats{
		Limit: c.cfg.Memory.Limit, InUse: c.sample.Total, Self: c.sample.Self,
		Reserved: c.reserved, Held: c.held, Estimate: c.estimateLocked(),
		Fresh: c.fresh[0] + c.fresh[1], Measured: c.measuredLocked(), Beyond: c.beyond,
	}
	if c.cfg.Memory.Beyond {
		st.Headroom = c.cfg.Memory.Headroom
	}
	return st
}

// String shows the memory gate for the log.
func (m MemoryConfig) String() string {
	if m.Limit == 0 {
		return "off"
	}
	beyond := "off"
	if m.Beyond {
		beyond = fmt.Sprintf("to the ceiling, %d MiB left free", m.Headroom/MiB)
	}
	return fmt.Sprintf("limit %d MiB, %d MiB a child, %dx a message's bytes in the supervisor, %dx in its child; past the bounds: %s",
		m.Limit/MiB, m.ChildCost/MiB, m.FrontFactor, m.ChildFactor, beyond)
}
