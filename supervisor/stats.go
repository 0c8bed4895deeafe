package supervisor

import (
	"sync"
	"sync/atomic"
)

// Stats are a supervisor's counters since New: detector verdicts, kill-ladder
// rungs, liveness traffic and reaping trouble. They feed operators and metrics.
type Stats struct {
	// Verdicts counts the supervisor's verdicts on the node a kill started from,
	// by cause: deadline, no_progress, pong_timeout, protocol_violation,
	// spawn_timeout, exited_without_result, cancelled, crashed.
	Verdicts map[string]int64
	Cancels  int64 // ctrl/cancel frames the kill ladder sent
	Terms    int64 // SIGTERMs delivered to a child's process group
	Kills    int64 // SIGKILLs delivered to a child's process group (ladder, violation, failed start, KillAll)
	Unreaped int64 // processes that did not reap inside their kill budget
	Pings    int64 // ctrl/ping frames written
	Pongs    int64 // ctrl/pong frames received that answered a ping
	// Orphans counts unknown (reparented) processes reaped by this process's
	// reaper; it is process-wide, not per supervisor.
	Orphans int64
}

// counters are the live form of Stats. The zero value is ready.
type counters struct {
	cancels, terms, kills, pings, pongs atomic.Int64

	mu       sync.Mutex // guards verdicts
	verdicts map[string]int64
}

func (c *counters) verdict(v verdict) {
	key := v.cause
	if key == "" {
		key = string(v.status)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.verdicts == nil {
		c.verdicts = make(map[string]int64)
	}
	c.verdicts[key]++
}

// Stats returns a snapshot of the supervisor's counters.
func (s *Supervisor) Stats() Stats {
	st := Stats{
		Cancels:  s.stats.cancels.Load(),
		Terms:    s.stats.terms.Load(),
		Kills:    s.stats.kills.Load(),
		Unreaped: s.unreaped.Load(),
		Pings:    s.stats.pings.Load(),
		Pongs:    s.stats.pongs.Load(),
		Orphans:  Orphans(),
		Verdicts: make(map[string]int64),
	}
	s.stats.mu.Lock()
	for k, v := range s.stats.verdicts {
		st.Verdicts[k] = v
	}
	s.stats.mu.Unlock()
	return st
}
