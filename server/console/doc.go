// Package console is agentd's operator console: a page at /ui/ (static HTML,
// CSS and JavaScript embedded in the binary, no build step and no network
// beyond the service itself) and the server-sent-event stream it is drawn
// from, GET /ui/events, which `agentd ctl a2a.Tree --watch` reads too.
//
// The stream pushes a Snapshot (the a2a.Tree result, the subagents that
// ended lately, the service's gauges) when it changes. Changes are heard two
// ways: the supervisor's Observer calls (a node admitted, started, making
// progress, finished), which Recent turns into a prompt push, and a short
// server-side tick that diffs the snapshot, for what no hook reports (a
// detector's view of a child, a pause, a node on the kill ladder, a
// breaker). A snapshot equal to the last one sent is not sent again. The
// page acts through the a2a.* JSON-RPC methods on the same origin (fetch),
// and reads a task with tasks/get.
//
// The package serves; it does not authorize. The server mounts Handler for
// operators only (server.Config.Console): docs/security.md says who that is.
//
// The page's Content-Security-Policy is strict (CSP): default-src 'self', no
// inline script or style, no framing.
package console
