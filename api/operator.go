package api

import "time"

// Operator methods: the a2a.* JSON-RPC family served on the A2A endpoint to
// callers with the operator role. Anyone else gets -32601 (method not found);
// bad params get -32602.
const (
	OpDrain    = "a2a.Drain"    // params DrainParams, result DrainResult
	OpLameDuck = "a2a.LameDuck" // params LameDuckParams, result LameDuckResult
	OpPause    = "a2a.Pause"    // no params, result PauseResult
	OpResume   = "a2a.Resume"   // no params, result PauseResult
	OpCancel   = "a2a.Cancel"   // params CancelParams, result CancelResult
	OpTree     = "a2a.Tree"     // no params, result TreeResult
	OpCaps     = "a2a.Caps"     // params CapsParams, result CapsResult
	// OpCloseBreaker closes a restart breaker: params CloseBreakerParams,
	// result CloseBreakerResult.
	OpCloseBreaker = "a2a.CloseBreaker"
)

// OperatorMethods lists the operator methods in a stable order.
var OperatorMethods = []string{OpDrain, OpLameDuck, OpPause, OpResume, OpCancel, OpTree, OpCaps, OpCloseBreaker}

// DrainParams asks the service to drain, as the first SIGTERM does. DeadlineMS,
// when set, is the drain budget in milliseconds instead of --drain-timeout; it
// is ignored when a drain is already under way.
type DrainParams struct {
	DeadlineMS *int64 `json:"deadline_ms,omitempty"`
}

// DrainResult reports the drain. ETAMS is the time left in the drain budget;
// the service exits as soon as every tree is gone, usually much earlier.
type DrainResult struct {
	Draining       bool      `json:"draining"`
	InFlight       int       `json:"in_flight"`
	ETAMS          int64     `json:"eta_ms"`
	DrainTimeoutMS int64     `json:"drain_timeout_ms"`
	StartedAt      time.Time `json:"started_at"`
}

// LameDuckParams sets readiness. Ready defaults to false: the service reports
// not ready on /readyz (load balancers stop sending new work) while it keeps
// serving everything, including new messages. Ready true undoes it.
type LameDuckParams struct {
	Ready *bool `json:"ready,omitempty"`
}

// LameDuckResult reports readiness as the operator set it, since when, and the
// tasks still running.
type LameDuckResult struct {
	Ready    bool      `json:"ready"`
	Since    time.Time `json:"since"`
	InFlight int       `json:"in_flight"`
}

// PauseResult reports the pause state and how many subagents the call changed:
// running children told to hold (Pause) or released, held spawns included
// (Resume).
type PauseResult struct {
	Paused   bool `json:"paused"`
	Affected int  `json:"affected"`
}

// CancelParams names the subtree to cancel. Handle "0" or none cancels every
// live tree; the service keeps running.
type CancelParams struct {
	Handle string `json:"handle,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// CancelAll is the handle that names every live tree.
const CancelAll = "0"

// CancelResult reports a cancel: whether any subagent was cancelled and how
// many subagents the cancelled subtrees held.
type CancelResult struct {
	Handle      string `json:"handle"`
	Cancelled   bool   `json:"cancelled"`
	SubtreeSize int    `json:"subtree_size"`
}

// TreeResult is the live subagent forest, depth first: each node follows its
// parent.
type TreeResult struct {
	Paused   bool       `json:"paused"`
	Draining bool       `json:"draining"`
	Nodes    []TreeNode `json:"nodes"`
	// Breakers are the restart governor's breakers, one per key that has had
	// a run end: the warm pool's ("warm-pool") and each session-backing
	// trigger's ("trigger:loop", "trigger:schedule",
	// "trigger:reactive:SERVER=URI"). a2a.CloseBreaker closes one.
	Breakers []Breaker `json:"breakers"`
}

// Breaker is one restart breaker's state.
type Breaker struct {
	Key string `json:"key"`
	// Open: no restart until an operator closes it.
	Open     bool       `json:"open"`
	OpenedAt *time.Time `json:"opened_at,omitempty"`
	// Failures are the weighted failures inside the governor's window (a
	// crash before ctrl/ready weighs 3); the breaker opens past 5.
	Failures int `json:"failures"`
	// Consecutive counts the failures since the last clean end; the backoff
	// doubles with each.
	Consecutive int       `json:"consecutive"`
	NextStart   time.Time `json:"next_start"`
	LastOutcome string    `json:"last_outcome"` // clean, failure or crash_before_ready
	LastAt      time.Time `json:"last_at"`
}

// CloseBreakerParams names the breaker to close (a Breaker's key).
type CloseBreakerParams struct {
	Key string `json:"key"`
}

// CloseBreakerResult reports a close: whether the key was known, and whether
// its breaker had been open.
type CloseBreakerResult struct {
	Key     string `json:"key"`
	Known   bool   `json:"known"`
	WasOpen bool   `json:"was_open"`
}

// Tree node statuses beyond the supervisor's starting, running and stopping.
const (
	NodeHeld   = "held"   // a spawn held by a pause, not yet started
	NodePaused = "paused" // running, told to hold before its next model call
)

// TreeNode is one live subagent, or an exec child (Kind "exec": a command
// run by the exec self-tool, with no control channel, bounded by its deadline
// alone).
type TreeNode struct {
	AgentPath    string    `json:"agent_path"`
	TaskID       string    `json:"task_id"`
	ParentTaskID string    `json:"parent_task_id,omitempty"`
	PID          int       `json:"pid"`
	Depth        int       `json:"depth"`
	Status       string    `json:"status"`
	Usage        Usage     `json:"usage"`
	Deadline     time.Time `json:"deadline"`
	Provider     string    `json:"provider"`
	Kind         string    `json:"kind"` // "subagent" or "exec"
}

// CapsParams adjusts the chokepoint caps; omitted fields keep their value and
// no params at all reads them. Every value must be positive and within its
// bound.
type CapsParams struct {
	MaxDepth          *int     `json:"max_depth,omitempty"`
	MaxChildren       *int     `json:"max_children,omitempty"`
	MaxTotalSubagents *int     `json:"max_total_subagents,omitempty"`
	MaxInflight       *int     `json:"max_inflight,omitempty"`
	SpawnBurst        *int     `json:"spawn_burst,omitempty"`
	SpawnRate         *float64 `json:"spawn_rate,omitempty"`
	TreeTokenCeiling  *int64   `json:"tree_token_ceiling,omitempty"`
}

// CapsResult holds the caps in force after the call.
type CapsResult struct {
	MaxDepth          int     `json:"max_depth"`
	MaxChildren       int     `json:"max_children"`
	MaxTotalSubagents int     `json:"max_total_subagents"`
	MaxInflight       int     `json:"max_inflight"`
	SpawnBurst        int     `json:"spawn_burst"`
	SpawnRate         float64 `json:"spawn_rate"`
	TreeTokenCeiling  int64   `json:"tree_token_ceiling"`
}
