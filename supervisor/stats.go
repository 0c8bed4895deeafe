package supervisor

import (
	"sync"
	"sync/atomic"
)

// Stats are a supervisor's counters since New: detector verdicts, kill-ladder
// rungs, liveness traffic and reaping trouble. They feed operators and metrics.
type Stats struct {
	// Verdicts counts the supervisor's verdicts on the node a kill started from,
	// by cause, else status: deadline, no_progress, pong_timeout,
	// protocol_violation, spawn_timeout, exited_without_result,
	// exhausted_tokens (a node over its grant), tree_token_ceiling, cancelled,
	// crashed.
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
	// Spawns counts the subagents this supervisor started, by provider: every
	// local child process, roots included ("local"). A nested spawn on a
	// remote provider is counted by that provider, not here.
	Spawns map[string]int64
	// Execs counts the exec children this supervisor started.
	Execs int64
	// Refusals counts the chokepoint's refusals by reason; every reason in
	// RefusalReasons is present.
	Refusals map[string]int64
	// TokensIn and TokensOut are the tokens every loop/event (and every remote
	// child's final usage) reported.
	TokensIn, TokensOut int64
}

// counters are the live form of Stats. The zero value is ready.
type counters struct {
	cancels, terms, kills, pings, pongs atomic.Int64
	execs                               atomic.Int64
	tokensIn, tokensOut                 atomic.Int64

	mu       sync.Mutex // guards verdicts, spawns, refusals
	verdicts map[string]int64
	spawns   map[string]int64
	refusals map[string]int64
}

// spawn counts one subagent started on provider.
func (c *counters) spawn(provider string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spawns == nil {
		c.spawns = make(map[string]int64)
	}
	c.spawns[provider]++
}

// refusal counts one refusal of the chokepoint; reason is one of
// RefusalReasons.
func (c *counters) refusal(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refusals == nil {
		c.refusals = make(map[string]int64)
	}
	c.refusals[reason]++
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
		Execs:    s.stats.execs.Load(),
		Orphans:  Orphans(),
		Verdicts: make(map[string]int64),
		Spawns:   map[string]int64{localProvider: 0},
		Refusals: make(map[string]int64, len(RefusalReasons)),

		TokensIn:  s.stats.tokensIn.Load(),
		TokensOut: s.stats.tokensOut.Load(),
	}
	for _, r := range RefusalReasons {
		st.Refusals[r] = 0
	}
	s.stats.mu.Lock()
	for k, v := range s.stats.verdicts {
		st.Verdicts[k] = v
	}
	for k, v := range s.stats.spawns {
		st.Spawns[k] = v
	}
	for k, v := range s.stats.refusals {
		st.Refusals[k] = v
	}
	s.stats.mu.Unlock()
	return st
}
