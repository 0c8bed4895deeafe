// Package a2a is agentd's A2A binding, both directions: the task engine that
// serves a2asrv.RequestHandler over agentd's own bounded task store, the
// AgentExecutor that turns an A2A message into a delegation and a delegation's
// end into Task events, the TerminalStatus to TaskState mapping, the distillate
// to Artifact mapping, and the agent card.
//
// Inside this package the name a2a refers to a2a-go's protocol types
// (github.com/a2aproject/a2a-go/a2a); other packages import this one as a2abind.
package a2a
