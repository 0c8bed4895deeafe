// Package a2a is agentd's A2A binding, both directions: the task engine that
// serves a2asrv.RequestHandler over agentd's own bounded task store (with
// follow-up messages as further turns, a bounded blocking send, ListTasks and
// push notifications checked against SSRF), the AgentExecutor that turns an
// A2A message (plain, or another agentd's structured delegation) into a
// delegation and a delegation's end into Task events, the TerminalStatus to
// TaskState mapping, the distillate to Artifact mapping, the agent card with
// the agentd contract extension, and the peer provider that delegates to a
// remote A2A agent over a2aclient. The A2A 1.0 wire shapes are in the
// subpackage a2a/v1.
//
// Inside this package the name a2a refers to a2a-go's protocol types
// (github.com/a2aproject/a2a-go/a2a); other packages import this one as a2abind.
package a2a
