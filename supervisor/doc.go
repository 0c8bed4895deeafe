// Package supervisor is the parent side of agentd's process tree. It re-execs
// the agentd binary once per subagent, speaks the control channel to each child,
// enforces every limit, and kills whole subtrees when a limit, a detector or an
// operator says so. It never talks to a model and never imports package agent.
//
// # Reaping: one owner of wait4
//
// Every subagent is a direct OS child of the supervisor (nested spawns go
// through the subagent.spawn chokepoint, which the supervisor serves), and the
// supervisor may also inherit reparented grandchildren when it is a subreaper.
// The package therefore uses one design, not a mix: children are started with
// syscall.ForkExec (never os/exec), and a single process-wide reaper goroutine is
// the only caller of wait4. On SIGCHLD it drains wait4(-1, WNOHANG) until nothing
// is left, hands each known pid's status to that child's waiter, and logs and
// reaps unknown pids as orphans (orphan=true).
//
// Two invariants make this race-free:
//   - Subscribe before start: the fork and the registration of the new pid happen
//     under the reaper's lock, and the reaper holds the same lock while it calls
//     wait4, so a child that exits at once cannot be collected before its waiter
//     exists.
//   - Never signal a reaped pid: signals to a child's process group are sent under
//     the reaper's lock and only while the child is not yet reaped, so a recycled
//     pid is never hit. When a known child is reaped its group gets one last
//     SIGKILL, so nothing it left in its group outlives it.
//
// Because the reaper owns wait4(-1), a process hosting a Supervisor must not wait
// for children in any other way (os/exec's Cmd.Wait would fail with "no child
// processes" after the reaper collected its child). agentd's own binary never
// does; tests that use os/exec live in packages that do not host a Supervisor.
//
// # Nesting: one chokepoint
//
// A subagent gets children only through the subagent.spawn self-tool, which
// the supervisor serves (spawn.go): it refuses while the tree drains, mints the
// child's depth, agent_id, agent_path and parent edge from the caller's own
// record, enforces the caps (max_depth, max_children, max_inflight for async
// children, max_total_subagents, the spawn-rate bucket, the tree-token
// ceiling), requires an objective, narrows the scope (a child holds exactly
// the tools it asked for, each held by its parent) and clamps the limits to
// what the parent and the tree can afford. Every refusal is a tool result with
// isError set. The checks and the registration of the child happen under the
// tree's lock (tree.go), which also holds the counters every loop/event folds
// into: the node's usage and the tree's.
//
// # Detectors, the kill ladder and the restart governor
//
// Each child with a payload is watched by three detectors (detect.go): A, its
// deadline (capped at Config.ChildDeadline); B, no progress frame for
// Config.ProgressTimeout; C, Config.PingMiss ctrl/ping in a row unanswered. B
// and C give the verdict stalled (causes no_progress, pong_timeout); a child
// with no events that still answers pings is BusyHealthy and left alone. EOF on
// control-out is classified (Exiting or Dead) but never ends a node: the reap
// does. Every verdict runs the kill ladder (ladder.go) on the node's subtree,
// deepest first: ctrl/cancel, DrainGrace, SIGTERM, KillGrace, SIGKILL,
// ReapGrace; a process that still has not been reaped is reported, counted
// (Stats.Unreaped) and abandoned, so Shutdown returns ErrUnclean rather than
// hang. Every write to a child is bounded by the write deadline (KillGrace
// with no byte of it taken by the child: the deadline measures progress, not
// the whole write, so a slow reader gets a large payload), and the goroutine that supervises a child writes to it only before its
// frame loop (the payload, and ctrl/pause for a child spawned while paused):
// pings, ctrl/cancel and tool answers go out on their own goroutines, so a
// child that stopped reading cannot hold up its own supervision.
//
// The restart governor (governor.go) paces restarts of children kept alive on
// purpose: the warm pool's refills (key PoolKey) and the session-backing roots
// of the loop, schedule and reactive triggers (package trigger, one key per
// session); a one-shot or workflow root never goes through it. Its circuit
// breaker opens after too many failures in a window, half-opens after a
// cool-down for one trial start, and closes when the trial works (or when an
// operator closes it); a failed trial re-opens it for a longer cool-down.
// Breakers and CloseBreaker expose it to operators (a2a.Tree,
// a2a.CloseBreaker), and Governor.Closed wakes whoever waits on an open
// breaker.
//
// # Workflows
//
// A workflow root (StartRequest.Workflow, workflow.go) has no process: the
// supervisor admits its steps as its children through the same chokepoint as
// a subagent's subagent.spawn, so one tree, one set of caps and one budget
// hold for the whole workflow.
//
// # Exec children
//
// The gated exec self-tool (exec.go) runs a command as an exec child of its
// caller: off unless Config.AllowExec, and only for a caller whose scope holds
// api.ExecRef (sensitive and egress in the Rule of Two). It passes the same
// caps as a spawn (capsLocked, without max_depth: it never nests), is forked
// by the same forker and reaped by the same reaper, in its own process group,
// and is a node of the tree (Kind exec). It has no control channel, so only
// detector A, its deadline (Config.ExecDeadline, never past its caller's),
// applies, and the ladder starts it at SIGTERM.
//
// # The agent:// resource plane
//
// resource.read and resource.wait (resource.go) serve agent://subagent/HANDLE
// (a descendant's report, whose one update is its completion),
// agent://blob/ID (a distillate stored by the reader's own tree) and the
// resources of the MCP servers the reader's scope grants (a ToolServer's
// optional ResourceReader). A resource_ref seed slice is read the same way,
// with the parent's authority, before the child is sent its payload.
//
// # Logs
//
// A child's stderr is its log: forwarded line by line through Config.Logger,
// or, with Config.ChildStderr, written there by the child itself. Every
// payload's telemetry carries the log level (a root's is Config.LogLevel) and
// log_content (Config.LogContent): without it, no prompt, model answer, tool
// argument or result is logged or put on a span, here or in any child.
//
// # The service-wide process bound
//
// Config.Budget, when set (serve sets it to its admission control), bounds
// the live processes across every tree: a nested spawn on the local provider
// or an exec child takes a slot at the chokepoint (registerLocked) or is
// refused ("spawn denied: service at capacity", "exec denied: ..."), and
// gives it back once its process is reaped (capacity.go). A tree's root holds
// the slot of its run, taken by whoever started the tree.
//
// # PDEATHSIG
//
// The kernel sends a child's parent-death signal when the thread that forked it
// exits, not when the process does. All forks therefore happen on one goroutine
// locked to its OS thread for the life of the process, and the child arms
// PR_SET_PDEATHSIG itself after exec (it is cleared by execve), then checks
// getppid() against AGENT_SUPERVISOR_PID.
package supervisor
