// Package mcp holds agentd's sessions with MCP tool servers. Only the
// supervisor holds them: a subagent never talks to an MCP server, it asks the
// supervisor with a tool/call frame, and the supervisor refuses anything outside
// the subagent's grant before a request reaches a server.
//
// A Set is the configured servers. Each Server keeps one session over
// streamable HTTP with the official MCP Go SDK: it connects, lists the tools
// (every page), pings while connected, and reconnects with exponential backoff
// and jitter when the session breaks. A Server implements supervisor.ToolServer
// and supervisor.ToolDescriber, so cmd hands the supervisor the Set's servers
// and the supervisor package never imports this one.
//
// Every failure a tool call can meet (the server down or reconnecting, a
// protocol error, a tool that reports an error, bad arguments) is a tool result
// with isError set, which the calling subagent's model sees; none is a Go error
// and none crashes anything. Results over the size cap are truncated with a
// note. Each tools/call carries the caller's run_id and traceparent in _meta.
//
// Server.Subscribe subscribes to a resource for reactive mode (subscribe.go):
// on every session, the first and each reconnect, resources/subscribe is
// followed at once by resources/read, so a change made while agentd was down
// or disconnected reaches the subscriber as the current content; each
// notifications/resources/updated is followed by a read too.
//
// A Server is also a supervisor.ResourceReader: resource.read of a subagent
// whose scope grants the server's resources ({SERVER, api.ResourcesTool},
// part of the root grant of a server that has resources) reaches it as
// resources/read, with the same _meta and the same wait for a session.
package mcp
