package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// TerminalStatus is the closed set of ways a subagent run ends
// (docs/ARCHITECTURE.md §6.4, §7.2). The zero value is not a valid status.
type TerminalStatus string

// The nine terminal statuses.
const (
	StatusCompleted       TerminalStatus = "completed"
	StatusRefused         TerminalStatus = "refused"
	StatusExhaustedSteps  TerminalStatus = "exhausted_steps"
	StatusExhaustedTokens TerminalStatus = "exhausted_tokens"
	StatusDeadline        TerminalStatus = "deadline"
	StatusStalled         TerminalStatus = "stalled"
	StatusLoopDetected    TerminalStatus = "loop_detected"
	StatusCancelled       TerminalStatus = "cancelled"
	StatusCrashed         TerminalStatus = "crashed"
)

// TerminalStatuses lists every status, in the order above.
var TerminalStatuses = []TerminalStatus{
	StatusCompleted, StatusRefused, StatusExhaustedSteps, StatusExhaustedTokens,
	StatusDeadline, StatusStalled, StatusLoopDetected, StatusCancelled, StatusCrashed,
}

// Valid reports whether s is one of the nine statuses.
func (s TerminalStatus) Valid() bool {
	for _, v := range TerminalStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// Partial reports whether s ends a run early but with a usable partial
// distillate: exhausted_steps, stalled or loop_detected.
func (s TerminalStatus) Partial() bool {
	return s == StatusExhaustedSteps || s == StatusStalled || s == StatusLoopDetected
}

// UnmarshalJSON refuses a status outside the closed set.
func (s *TerminalStatus) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if !TerminalStatus(v).Valid() {
		return fmt.Errorf("api: unknown terminal status %q", v)
	}
	*s = TerminalStatus(v)
	return nil
}

// Causes refine a status for the exit-code table and for operators. They are
// machine-readable and stable.
const (
	CauseIntelligenceUnreachable = "intelligence_unreachable"
	CauseMCPUnavailable          = "mcp_unavailable"
	CauseProtocolViolation       = "protocol_violation"
	CauseSpawnTimeout            = "spawn_timeout"
	CauseExitedWithoutResult     = "exited_without_result"
	CauseTreeTokenCeiling        = "tree_token_ceiling"
	CauseSchemaMismatch          = "schema_mismatch"
	// CauseInputTimeout: a question of the task waited past the input
	// timeout without an answer (status deadline).
	CauseInputTimeout = "input_timeout"
	// CauseSupervisorLost: agentd lost the process tree running the task
	// (it restarted, or its replica went away) and did not run it again.
	CauseSupervisorLost = "supervisor_lost"
	// CauseNoProgress: the supervisor's no-progress watchdog (Detector B) saw
	// no frame for the progress timeout; the status is stalled.
	CauseNoProgress = "no_progress"
	// CausePongTimeout: the child left too many ctrl/ping unanswered in a row
	// (Detector C); the status is stalled.
	CausePongTimeout = "pong_timeout"
	// CausePeerUnsupported: a remote peer refused the A2A protocol version
	// or binding it was called in (the detail says which, and what its card
	// offers); the status is crashed.
	CausePeerUnsupported = "peer_unsupported"
	// CauseMemoryExceeded: the supervisor's memory policy stopped the child
	// (SIGKILL): its PSS passed its own limit, or it was the largest child
	// over its share when the pod neared its memory limit; the status is
	// crashed.
	CauseMemoryExceeded = "memory_exceeded"
	// CauseResumeFailed: a task recovered while it waited for its caller's
	// answer could not resume from its stored tree (the record does not
	// decode or hold together, or no request was kept); the status is
	// crashed.
	CauseResumeFailed = "resume_failed"
)

// SubagentResult is what a subagent hands back: a terminal status, the
// distillate, and its usage. It is the last upward control frame ("result").
type SubagentResult struct {
	Status     TerminalStatus `json:"status"`
	Distillate ResultBody     `json:"distillate"`
	Usage      Usage          `json:"usage"`
	// Cause refines Status (one of the Cause constants), when there is more to say.
	Cause string `json:"cause,omitempty"`
	// Detail is a human-readable explanation of a non-completed status, or of a
	// schema mismatch surfaced to the parent with the status preserved.
	Detail string `json:"detail,omitempty"`
}

// Usage is token and step accounting. TokensIn counts every input token a
// model read, those it read from or wrote to its prompt cache included;
// CacheReadTokens and CacheWriteTokens say how many of TokensIn were which
// (reported by the Messages dialect; zero otherwise).
type Usage struct {
	TokensIn         int64 `json:"tokens_in"`
	TokensOut        int64 `json:"tokens_out"`
	Steps            int   `json:"steps"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// Tokens is the total of input and output tokens.
func (u Usage) Tokens() int64 { return u.TokensIn + u.TokensOut }

// Add returns u plus v.
func (u Usage) Add(v Usage) Usage {
	return Usage{TokensIn: u.TokensIn + v.TokensIn, TokensOut: u.TokensOut + v.TokensOut, Steps: u.Steps + v.Steps,
		CacheReadTokens: u.CacheReadTokens + v.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens}
}

// ResultBody is the distillate: an inline JSON value (a string for text and
// markdown output), or a reference to stored bulk plus a summary. The zero value
// is an empty inline body.
type ResultBody struct {
	Inline    json.RawMessage `json:"-"`
	Reference *Reference      `json:"-"`
}

// Reference points at a stored result too large to inline.
type Reference struct {
	URI     string `json:"uri"`
	Summary string `json:"summary"`
}

// InlineText returns an inline body holding the string s.
func InlineText(s string) ResultBody {
	b, _ := json.Marshal(s)
	return ResultBody{Inline: b}
}

// Text returns the body as text: an inline string unquoted, other inline JSON as
// written, a reference's summary.
func (b ResultBody) Text() string {
	if b.Reference != nil {
		return b.Reference.Summary
	}
	if len(b.Inline) > 0 && b.Inline[0] == '"' {
		if s, ok := unescapedText(b.Inline); ok {
			return s
		}
		var s string
		if json.Unmarshal(b.Inline, &s) == nil {
			return s
		}
	}
	return string(b.Inline)
}

// unescapedText returns the text of lit when lit is a JSON string literal and
// nothing more, without an escape or a control character, in valid UTF-8:
// the common inline text, which json.Unmarshal decodes to exactly that,
// after a pass of its own over the literal and a decoder's allocations.
// Anything else is not ok, and json.Unmarshal decides.
func unescapedText(lit []byte) (string, bool) {
	n := len(lit)
	if n < 2 || lit[0] != '"' || lit[n-1] != '"' {
		return "", false
	}
	body := lit[1 : n-1]
	for _, c := range body {
		if c == '"' || c == '\\' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

type resultBodyJSON struct {
	Kind    string          `json:"kind"`
	Value   json.RawMessage `json:"value,omitempty"`
	URI     string          `json:"uri,omitempty"`
	Summary string          `json:"summary,omitempty"`
}

// MarshalJSON encodes {"kind":"inline","value":...} or
// {"kind":"reference","uri":...,"summary":...}.
func (b ResultBody) MarshalJSON() ([]byte, error) {
	if b.Reference != nil {
		return json.Marshal(resultBodyJSON{Kind: "reference", URI: b.Reference.URI, Summary: b.Reference.Summary})
	}
	v := b.Inline
	if len(v) == 0 {
		v = json.RawMessage(`""`)
	}
	return json.Marshal(resultBodyJSON{Kind: "inline", Value: v})
}

// UnmarshalJSON decodes either form and refuses anything else.
func (b *ResultBody) UnmarshalJSON(data []byte) error {
	var j resultBodyJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	switch j.Kind {
	case "inline":
		if j.URI != "" || j.Summary != "" {
			return errors.New("api: an inline distillate has no uri or summary")
		}
		*b = ResultBody{Inline: bytes.Clone(j.Value)}
	case "reference":
		if j.URI == "" || len(j.Value) != 0 {
			return errors.New("api: a reference distillate has a uri and no value")
		}
		*b = ResultBody{Reference: &Reference{URI: j.URI, Summary: j.Summary}}
	default:
		return fmt.Errorf("api: distillate kind %q: want inline or reference", j.Kind)
	}
	return nil
}

// Validate checks a result as the supervisor receives it.
func (r *SubagentResult) Validate() error {
	if !r.Status.Valid() {
		return fmt.Errorf("result: unknown status %q", r.Status)
	}
	if r.Usage.TokensIn < 0 || r.Usage.TokensOut < 0 || r.Usage.Steps < 0 {
		return errors.New("result: negative usage")
	}
	return nil
}
