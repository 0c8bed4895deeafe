// Package tasks is agentd's task engine: it serves a2asrv.RequestHandler, owns
// every task's lifecycle from submitted to a terminal state, runs an
// a2asrv.AgentExecutor per new message (follow-up messages become further
// turns of the running task), fans events out to streaming subscribers,
// bounds a blocking send, lists a caller's tasks, and delivers push
// notifications to webhooks checked against SSRF. It keeps tasks behind the
// small Store interface; MemoryStore is the bounded store in memory. A task
// is visible only to the caller that created it and to operators.
//
// The engine knows A2A's task model, not what a task does: the executor (in
// agentd, a2abind.Executor) decides that. docs/ARCHITECTURE.md describes the
// engine and its store.
package tasks
