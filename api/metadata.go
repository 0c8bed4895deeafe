package api

import "strings"

// ReservedPrefix starts every metadata key agentd reserves for itself. A
// caller may set only those of its keys that agentd reads as input
// (CallerMaySet); every other one is agentd's own output.
const ReservedPrefix = "agentd/"

// Metadata keys of a delegation, on a message or a send request: the mesh
// metadata one agentd sends another (the a2abind contract extension), and
// the routing hints a client may set on a root message. A caller may set
// them.
const (
	MetaDepth    = "agentd/depth"     // mesh depth the delegated root runs at
	MetaMaxDepth = "agentd/max_depth" // the mesh-wide depth cap: the deepest depth a subagent may sit at
	MetaHops     = "agentd/hops"      // instance ids the delegation passed through, oldest first
	MetaBudget   = "agentd/budget"    // {max_tokens, max_steps, deadline_ms}
	MetaProvider = "agentd/provider"  // routing: the provider to use ("local", "peer:NAME")
	MetaSkill    = "agentd/skill"     // routing: the skill rules match on; with --agents, the declared skill whose agent type runs the root
)

// DataKeyDelegation is the key of the data part that carries the structured
// delegation: {"agentd/delegation": Delegation} (a2abind). It is a data
// part's key, not metadata.
const DataKeyDelegation = "agentd/delegation"

// Metadata keys of admission. A caller asks for a priority with MetaPriority
// ("low", "normal" or "high") in the message's metadata (or the request's).
// A task that has to wait for a slot records the priority it waits at under
// the same key, and its place in the queue under MetaQueuePosition (1 is
// next), which tasks/get and ListTasks report as it changes; the position is
// dropped once the task starts.
const (
	MetaPriority      = "agentd/priority"
	MetaQueuePosition = "agentd/queue_position"
)

// Metadata keys recording who created a task: the caller's identity (a
// SPIFFE ID, or token:NAME for a static bearer token; empty when anonymous)
// and how it authenticated (mtls, jwt-svid, token or none).
const (
	MetaCaller     = "agentd/caller"
	MetaCallerAuth = "agentd/caller_auth"
)

// Metadata keys agentd writes on tasks. MetaAgentPath is also the _meta key
// of the subagent's place on every MCP tools/call.
const (
	MetaStatus     = "agentd/status"      // the exact TerminalStatus
	MetaCause      = "agentd/cause"       // the status's cause, when there is one
	MetaUsage      = "agentd/usage"       // {tokens_in, tokens_out, steps}
	MetaAgentPath  = "agentd/agent_path"  // the subagent's place in its tree
	MetaParentTask = "agentd/parent_task" // a nested subagent's parent task id
	MetaRunID      = "agentd/run_id"
	MetaStarted    = "agentd/started" // when the task started working (RFC 3339, UTC): the console's start time and duration
)

// Metadata keys of nested tasks (a2abind's TreeObserver). Nested tasks also
// carry MetaParentTask, MetaAgentPath, MetaRunID and MetaProvider ("local",
// or the peer the subagent was delegated to).
const (
	// MetaNestedUnrecorded is the key of a root task counting its nested
	// tasks the store refused (the caller's task quota, a full store):
	// their subagents ran, but they are not tasks anyone can read.
	MetaNestedUnrecorded = "agentd/nested_unrecorded"
	// MetaDisposition is the key of a nested task saying how its parent
	// waits for it: sync, async or detach.
	MetaDisposition = "agentd/disposition"
	// MetaKind is the key of a nested task saying what it is: a subagent,
	// or an exec child (a command run by the exec self-tool, whose artifact
	// is its exit and output).
	MetaKind = "agentd/kind"
)

// MetaStreamTask is the key, on an artifact-update event of a streamed
// model text shown in an ancestor's task (its parent's and its root's), of
// the nested task whose text it is; MetaAgentPath names its subagent. The
// event's artifact is that task's distillate artifact, and it is shown,
// never kept: the ancestor's task never holds it.
const MetaStreamTask = "agentd/stream_task"

// MetaWrapped marks an A2A 0.3 data part that carries a non-object 1.0 value
// as {"value": v}; converting back to 1.0 unwraps it (a2av1).
const MetaWrapped = "agentd/wrapped"

// MetaOffloaded is the metadata key that marks offloaded content (the task
// engine's offloading): on a part, what was moved; on the task, how many
// parts and bytes.
const MetaOffloaded = "agentd/offloaded"

// MetaAttempt is the task metadata key of a rerun task's attempt number (2
// for the run after the first); a task without it is on its first attempt.
const MetaAttempt = "agentd/attempt"

// Metadata of a one-shot run's record whose run was interrupted by a signal
// to its agentd.
const (
	// MetaInterrupted is true on a record stored back submitted because the
	// first SIGTERM or SIGINT drained its run before the root ended, false
	// once the next run with its id has taken it up again.
	MetaInterrupted = "agentd/interrupted"
	// MetaInterruptions counts the reruns of a record after an interruption.
	MetaInterruptions = "agentd/interruptions"
)

// Metadata keys of a triggered run, on its A2A task (and in its log lines).
const (
	MetaTrigger         = "agentd/trigger"          // the mode that started the run
	MetaTriggerSession  = "agentd/trigger_session"  // the restart governor's key for the session
	MetaTriggerSeq      = "agentd/trigger_seq"      // the n-th event of the session, from 1
	MetaTriggerAttempt  = "agentd/trigger_attempt"  // 1, plus one for each restart of the same event
	MetaTriggerTick     = "agentd/trigger_tick"     // schedule: the tick served (RFC 3339)
	MetaTriggerMissed   = "agentd/trigger_missed"   // schedule: the tick was missed while agentd was down
	MetaTriggerResource = "agentd/trigger_resource" // reactive: the resource uri
	MetaTriggerServer   = "agentd/trigger_server"   // reactive: the MCP server
	MetaTriggerReason   = "agentd/trigger_reason"   // reactive: subscribed (read after subscribe) or updated
)

// callerInput are the reserved keys a caller may set on a message or a send
// request: the mesh metadata of another agentd's delegation, the routing
// hints and the admission priority.
var callerInput = map[string]bool{
	MetaDepth: true, MetaMaxDepth: true, MetaHops: true, MetaBudget: true,
	MetaProvider: true, MetaSkill: true, MetaPriority: true,
}

// CallerMaySet reports whether a caller may set metadata key on a message or
// a send request: any key outside ReservedPrefix, and the reserved keys
// agentd reads as input (MetaDepth, MetaMaxDepth, MetaHops, MetaBudget,
// MetaProvider, MetaSkill, MetaPriority). Every other agentd/ key
// (MetaCaller, MetaStatus, MetaParentTask, MetaAgentPath, ...) is only ever
// what agentd wrote: the HTTP front drops it from a caller's input. It is
// the one place that decides, and is safe for concurrent use.
func CallerMaySet(key string) bool {
	return !strings.HasPrefix(key, ReservedPrefix) || callerInput[key]
}

// Metadata keys of a question (subagent.ask): on the status message of a task
// that is input-required, which subagent asks (its agent path), and the
// choices it offers, when it offers some.
const (
	MetaAskPath    = "agentd/ask_path"
	MetaAskChoices = "agentd/ask_choices"
	// An approval gate's question (a tool call that waits for a person's
	// yes) also names the tool and the call's arguments.
	MetaAskTool      = "agentd/ask_tool"
	MetaAskArguments = "agentd/ask_arguments"
	// MetaAnsweredBy is on an answer an operator gave on the caller's
	// behalf (a2a.Answer, the console): the operator's identity.
	MetaAnsweredBy = "agentd/answered_by"
)
