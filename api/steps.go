package api

import "time"

// Step kinds: what a subagent did, one record each, in the order the
// supervisor heard it.
const (
	StepStart = "start" // the subagent started (its objective, its parent)
	StepModel = "model" // one model call: tokens in and out, duration, endpoint
	StepTool  = "tool"  // one tool call: its name, arguments, result or error (spawns and awaits are self-tools)
	StepEnd   = "end"   // the subagent ended: status, cause, usage, distillate
	// StepDropped marks where a tree's step budget ran out: the steps after
	// it were not kept.
	StepDropped = "dropped"
)

// MaxStepText is how much of one text of a step (a tool call's arguments or
// result, an objective, a distillate) is kept, in bytes; the rest is cut and
// the cut said (Step.Cut).
const MaxStepText = 16 << 10

// Step is one thing a subagent of a tree did, as the console's task page
// shows it and the task store keeps it (tasks.StepStore).
type Step struct {
	At        time.Time `json:"at"`
	Kind      string    `json:"kind"`
	TaskID    string    `json:"task_id"` // the subagent's handle (its A2A task id)
	ParentID  string    `json:"parent_id,omitempty"`
	AgentPath string    `json:"agent_path"`
	Depth     int       `json:"depth,omitempty"`
	Step      int       `json:"step,omitempty"` // the loop's step number (model)
	// Model calls.
	TokensIn   int64  `json:"tokens_in,omitempty"`
	TokensOut  int64  `json:"tokens_out,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"` // model and tool calls
	Endpoint   string `json:"endpoint,omitempty"`
	// Tool calls.
	Tool    string `json:"tool,omitempty"`
	Args    string `json:"args,omitempty"`
	Result  string `json:"result,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	// Start and end.
	Objective  string `json:"objective,omitempty"`
	Status     string `json:"status,omitempty"`
	Cause      string `json:"cause,omitempty"`
	Distillate string `json:"distillate,omitempty"`
	Usage      *Usage `json:"usage,omitempty"`
	// Cut is how many bytes of the step's texts were cut to MaxStepText.
	Cut int `json:"cut,omitempty"`
}

// ClipStepText returns s cut to at most MaxStepText bytes (at a UTF-8
// boundary) and how many bytes were cut.
func ClipStepText(s string) (string, int) {
	if len(s) <= MaxStepText {
		return s, 0
	}
	n := MaxStepText
	for n > 0 && s[n]&0xC0 == 0x80 { // not in the middle of a character
		n--
	}
	return s[:n], len(s) - n
}
