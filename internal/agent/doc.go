// Package agent is the subagent side of the process tree: the control client
// that speaks the framed JSON-RPC channel on stdin/stdout, the ReAct loop, the
// stop conditions that end it in a TerminalStatus, the distillate's shaping,
// and the rehearsal of a child waiting in the warm pool. The intelligences the
// loop calls (builtin deterministic models; OpenAI-compatible endpoints) are
// package intelligence's, seen here through intelligence.Model.
//
// A subagent is the agentd binary re-exec'd with AGENT_SUBAGENT set; cmd/agentd
// calls Main before anything else. This package imports api and never
// supervisor: the two sides meet only on the wire.
package agent
