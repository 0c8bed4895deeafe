package api

import "time"

// Operator methods: the a2a.* JSON-RPC family served on the A2A endpoint to
// callers with the operator role. Anyone else gets -32601 (method not found);
// bad params get -32602.
const (
	OpDrain    = "a2a.Drain"    // params DrainParams, result DrainResult
	OpLameDuck = "a2a.LameDuck" // params LameDuckParams, result LameDuckResult
	OpPause    = "a2a.Pause"    // optional params PauseParams, result PauseResult
	OpResume   = "a2a.Resume"   // optional params PauseParams, result PauseResult
	OpCancel   = "a2a.Cancel"   // params CancelParams, result CancelResult
	OpTree     = "a2a.Tree"     // no params, result TreeResult
	OpCaps     = "a2a.Caps"     // params CapsParams, result CapsResult
	// OpCloseBreaker closes a restart breaker: params CloseBreakerParams,
	// result CloseBreakerResult.
	OpCloseBreaker = "a2a.CloseBreaker"
	// OpAudit lists the audit trail of operator actions, newest first:
	// params AuditParams, result AuditResult.
	OpAudit = "a2a.Audit"
	// OpQuestions lists the questions and approvals tasks wait on:
	// params QuestionsParams, result QuestionsResult.
	OpQuestions = "a2a.Questions"
	// OpAnswer answers a waiting task's question (or decides its
	// approval) on its caller's behalf: params AnswerParams, result
	// AnswerResult.
	OpAnswer = "a2a.Answer"
	// OpSteer sends a running subagent a message that joins its
	// conversation at its next step: params SteerParams, result SteerResult.
	OpSteer = "a2a.Steer"
)

// OperatorMethods lists the operator methods in a stable order.
var OperatorMethods = []string{OpDrain, OpLameDuck, OpPause, OpResume, OpCancel, OpTree, OpCaps, OpCloseBreaker, OpAudit, OpQuestions, OpAnswer, OpSteer}

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
// parent; with the service's admission gauges (absent when the service has
// no admission control, as a one-shot run) and its restart breakers (the
// warm pool's, "warm-pool", among them once it has refilled).
type TreeResult struct {
	Paused    bool       `json:"paused"`
	Draining  bool       `json:"draining"`
	Nodes     []TreeNode `json:"nodes"`
	Admission *Admission `json:"admission,omitempty"`
	// Breakers are the restart governor's breakers, one per key that has had
	// a run end: the warm pool's ("warm-pool") and each session-backing
	// trigger's ("trigger:loop", "trigger:schedule",
	// "trigger:reactive:SERVER=URI"). a2a.CloseBreaker closes one.
	Breakers []Breaker `json:"breakers"`
	// IntelligenceBreakers are the model endpoints' circuit breakers,
	// service-wide, as subagents reported them (docs/intelligence.md);
	// absent before any report.
	IntelligenceBreakers []EndpointBreaker `json:"intelligence_breakers,omitempty"`
	// WarmPool is the warm pool's state; absent when there is none.
	WarmPool *WarmPool `json:"warm_pool,omitempty"`
}

// WarmPool is the state of the supervisor's warm pool: its size, the
// children ready and waiting for a payload, those still starting, and how
// many spawns it served and how many found it empty.
type WarmPool struct {
	Size     int   `json:"size"`
	Idle     int   `json:"idle"`
	Starting int   `json:"starting"`
	Assigned int64 `json:"assigned"`
	Cold     int64 `json:"cold"`
}

// Admission is the service's admission control: its bounds, their hard
// ceilings, and how full it is.
type Admission struct {
	MaxRuns          int `json:"max_live_runs"`      // runs (live trees) at once
	MaxLiveSubagents int `json:"max_live_subagents"` // live subagent processes, every tree's root included
	QueueCapacity    int `json:"queue_capacity"`     // runs that may wait for a slot
	// Ceiling is what a2a.Caps may raise the bounds to, derived from the
	// memory limit.
	Ceiling AdmissionBounds `json:"ceiling"`
	Runs    int             `json:"runs"` // runs holding a slot
	// Slots is the process slots in use (one per run, one per nested local
	// subagent); LiveProcesses the subagent processes alive now, never more.
	Slots         int `json:"slots"`
	LiveProcesses int `json:"live_processes"`
	Queued        int `json:"queued"`
	// QueuedByPriority counts the queued runs by priority (low, normal, high).
	QueuedByPriority map[string]int `json:"queued_by_priority"`
	Callers          int            `json:"callers"`  // callers with a run running or queued
	Admitted         int64          `json:"admitted"` // runs dispatched since start
	// Cancelled counts runs that left the queue without running.
	Cancelled int64 `json:"cancelled"`
	// Refused counts nested spawns refused for want of a process slot.
	Refused int64 `json:"refused"`
	// Shed counts the requests turned away (HTTP 429), by reason:
	// queue_full, caller_queue_full, closed.
	Shed              map[string]int64 `json:"shed"`
	RetryAfterSeconds int              `json:"retry_after_seconds"` // the hint a request shed now gets
}

// AdmissionBounds are admission's three bounds.
type AdmissionBounds struct {
	MaxRuns          int `json:"max_live_runs"`
	MaxLiveSubagents int `json:"max_live_subagents"`
	QueueCapacity    int `json:"queue_capacity"`
}

// Restart breaker states.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"      // no restart until next_trial
	BreakerHalfOpen = "half-open" // the cool-down is over: one trial start
)

// Breaker is one restart breaker's state. It opens on too many failures in
// the governor's window, half-opens after a cool-down (next_trial) for one
// trial start, and closes when the trial succeeds or an operator closes it
// (a failed trial re-opens it for a longer cool-down).
type Breaker struct {
	Key   string `json:"key"`
	State string `json:"state"` // closed, open or half-open
	// Since is when State began (omitted for a breaker never opened).
	Since *time.Time `json:"since,omitempty"`
	// Open: the state is open or half-open: no restart but the one trial.
	Open     bool       `json:"open"`
	OpenedAt *time.Time `json:"opened_at,omitempty"`
	// NextTrial is when an open breaker half-opens for one trial start.
	NextTrial *time.Time `json:"next_trial,omitempty"`
	// Trial: the half-open breaker's trial start is under way.
	Trial    bool `json:"trial,omitempty"`
	Openings int  `json:"openings"` // times opened since it was last closed
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

// CloseBreakerParams names the breaker to close (a Breaker's key; the warm
// pool's is "warm-pool", which `agentd ctl a2a.CloseBreaker` closes by
// default).
type CloseBreakerParams struct {
	Key string `json:"key"`
}

// CloseBreakerResult reports a close: whether the key was known, whether its
// breaker had been open (Was: the state it was in), and the breaker after
// the call.
type CloseBreakerResult struct {
	Key     string  `json:"key"`
	Known   bool    `json:"known"`
	WasOpen bool    `json:"was_open"`
	Was     string  `json:"was"` // closed, open or half-open
	Breaker Breaker `json:"breaker"`
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
	// MaxTokens is the subagent's token grant, which Usage counts against.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// Objective is the subagent's objective, clipped to MaxTreeObjective
	// characters.
	Objective   string      `json:"objective,omitempty"`
	Disposition Disposition `json:"disposition,omitempty"` // sync, async or detach; empty for a root
	// Health is the detectors' view of a running child process: healthy,
	// busy_healthy (pongs but no recent events: a long call), stuck, exiting
	// or dead; empty before its detectors start and for a node without a
	// process of its own (a peer's delegation, a workflow root).
	Health string `json:"health,omitempty"`
	// LastProgress is when the child last sent a frame other than a pong
	// (the no-progress detector's clock), and MissedPings how many pings in
	// a row it has left unanswered (the ping detector); set with Health.
	LastProgress *time.Time `json:"last_progress,omitempty"`
	MissedPings  int        `json:"missed_pings,omitempty"`
	// Steerable is the runtime capability of steering (a2a.Steer): whether
	// the subagent takes a message now; NotSteerable says why not (an exec
	// child, a peer that takes no follow-ups, a spawn not started yet).
	Steerable    bool   `json:"steerable"`
	NotSteerable string `json:"not_steerable,omitempty"`
}

// MaxTreeObjective is how many characters of a subagent's objective a
// TreeNode carries.
const MaxTreeObjective = 160

// CapsParams adjusts the chokepoint caps and the service's admission bounds;
// omitted fields keep their value and no params at all reads them. Every cap
// must be positive and within its bound; max_live_runs and max_live_subagents at
// least 1 and queue_capacity at least 0, each at most its ceiling
// (Admission.Ceiling), and max_live_runs at most max_live_subagents. Lowering an
// admission bound stops nothing that runs. A call that changes nothing when
// any value is refused.
type CapsParams struct {
	MaxDepth          *int     `json:"max_depth,omitempty"`
	MaxChildren       *int     `json:"max_children,omitempty"`
	MaxTotalSubagents *int     `json:"max_total_subagents,omitempty"`
	MaxInflight       *int     `json:"max_inflight,omitempty"`
	SpawnBurst        *int     `json:"spawn_burst,omitempty"`
	SpawnRate         *float64 `json:"spawn_rate,omitempty"`
	TreeTokenCeiling  *int64   `json:"tree_token_ceiling,omitempty"`

	MaxRuns          *int `json:"max_live_runs,omitempty"`
	MaxLiveSubagents *int `json:"max_live_subagents,omitempty"`
	QueueCapacity    *int `json:"queue_capacity,omitempty"`
}

// CapsResult holds the caps in force after the call, and the admission
// bounds and gauges (absent without admission control).
type CapsResult struct {
	MaxDepth          int     `json:"max_depth"`
	MaxChildren       int     `json:"max_children"`
	MaxTotalSubagents int     `json:"max_total_subagents"`
	MaxInflight       int     `json:"max_inflight"`
	SpawnBurst        int     `json:"spawn_burst"`
	SpawnRate         float64 `json:"spawn_rate"`
	TreeTokenCeiling  int64   `json:"tree_token_ceiling"`

	Admission *Admission `json:"admission,omitempty"`
}

// AuditParams filters the audit trail. Limit is at most MaxAuditLimit (zero
// means DefaultAuditLimit); Before is the cursor of the previous page (the
// Next of its result); Method and Caller, when set, match exactly.
type AuditParams struct {
	Limit  int    `json:"limit,omitempty"`
	Before string `json:"before,omitempty"`
	Method string `json:"method,omitempty"`
	Caller string `json:"caller,omitempty"`
}

// Bounds of an a2a.Audit page.
const (
	DefaultAuditLimit = 50
	MaxAuditLimit     = 500
)

// AuditRecord is one operator action: who (the caller's identity), what
// (the a2a.* method or console action), on what (its target: a task, a
// path, a breaker's key; empty for service-wide ones), and how it ended
// (Outcome "ok" or "error", Detail the error's text, or the params of an
// action that succeeded). Caller is "anonymous" for the unauthenticated
// caller of the development mode.
type AuditRecord struct {
	Time     time.Time `json:"time"`
	Caller   string    `json:"caller"`
	Method   string    `json:"method"`
	Target   string    `json:"target,omitempty"`
	Outcome  string    `json:"outcome"`
	Detail   string    `json:"detail,omitempty"`
	Instance string    `json:"instance,omitempty"` // the replica that served it
}

// AuditResult is a page of the audit trail, newest first; Next, when set,
// is the Before of the following page.
type AuditResult struct {
	Records []AuditRecord `json:"records"`
	Next    string        `json:"next,omitempty"`
}
