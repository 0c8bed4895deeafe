package api

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Control-channel methods. "down" frames go from the supervisor to a child on the
// child's stdin; "up" frames go from the child on its stdout.
const (
	MethodSpawn    = "spawn"       // down, first frame: params SpawnPayload
	MethodReady    = "ctrl/ready"  // up, first frame: params Ready
	MethodPing     = "ctrl/ping"   // down: params Ping
	MethodPong     = "ctrl/pong"   // up: params Ping, the same seq
	MethodCancel   = "ctrl/cancel" // down: params Cancel
	MethodEvent    = "loop/event"  // up: params LoopEvent
	MethodToolCall = "tool/call"   // up, a request with an id: params ToolCall; answered with a ToolResult
	MethodResult   = "result"      // up, the last frame: params SubagentResult
	MethodBlobPut  = "blob/put"    // up, a request with an id: params BlobPut; answered with a BlobRef
	MethodPause    = "ctrl/pause"  // down, no params: hold before the next model call
	MethodResume   = "ctrl/resume" // down, no params: go on after ctrl/pause
	MethodSteer    = "ctrl/steer"  // down: params Steer, a message that joins the conversation before the next model call
	// MethodRehearse is down, no params, before the spawn frame and at most
	// once: the warm pool's next child in line rehearses its payload's path
	// while it waits (internal/agent's rehearse). Sent only to agentd's own
	// children (supervisor.Config.PoolRehearse); any other child reads its
	// first frame as the spawn.
	MethodRehearse = "ctrl/rehearse"
)

// Environment variables of subagent mode.
const (
	// EnvSubagent marks a process as a subagent; set only by the supervisor.
	EnvSubagent = "AGENT_SUBAGENT"
	// EnvSupervisorPID carries the supervisor's pid, which the child compares with
	// getppid() after arming PR_SET_PDEATHSIG.
	EnvSupervisorPID = "AGENT_SUPERVISOR_PID"
	// EnvIntelligenceKey carries the model API key to a child, never argv.
	EnvIntelligenceKey = "AGENT_INTELLIGENCE_KEY"
	// EnvMaxFrame carries the control frame size limit (bytes) to a child,
	// so both ends of the control channel refuse the same frames; unset
	// means DefaultMaxFrame.
	EnvMaxFrame = "AGENT_MAX_FRAME"
	// EnvChildMemStats, when set (the supervisor passes it on from its own
	// environment), makes a child log the Go runtime's memory classes
	// (runtime/metrics /memory/classes/*) after ctrl/ready and after a warm
	// child's rehearsal: figure 9's idle child by class. Off by default.
	EnvChildMemStats = "AGENT_CHILD_MEMSTATS"
)

// Ready is the child's first upward frame.
type Ready struct {
	PID int `json:"pid"`
}

// Ping carries a liveness sequence number, echoed in the pong.
type Ping struct {
	Seq uint64 `json:"seq"`
}

// Cancel asks the child to stop its loop with status cancelled.
type Cancel struct {
	Reason string `json:"reason,omitempty"`
}

// Loop event kinds.
const (
	EventStep     = "step"
	EventModel    = "model"
	EventToolCall = "tool_call"
	// EventText carries the model's text of a step as it is produced (Text),
	// with no usage: what a streaming endpoint has sent since the previous
	// text event of the step. The result frame's distillate stays the
	// answer; the text events only show it coming.
	EventText = "text"
	// EventSteered says the loop took one steering message (ctrl/steer)
	// into its conversation; no usage.
	EventSteered = "steered"
)

// LoopEvent reports progress and the token usage since the previous event.
type LoopEvent struct {
	Step       int    `json:"step"`
	Kind       string `json:"kind"`
	UsageDelta Usage  `json:"usage_delta"`
	Text       string `json:"text,omitempty"` // EventText only
	// DurationMS and Endpoint are a model event's call: how long it took
	// and the endpoint that answered (EventModel only; absent from a child
	// that does not send them).
	DurationMS int64  `json:"duration_ms,omitempty"`
	Endpoint   string `json:"endpoint,omitempty"`
}

// ToolCall is a child's request to run a tool; the supervisor executes it.
type ToolCall struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
	// Traceparent is the W3C trace context of the child's span for this call,
	// so the supervisor's side of the call (a nested spawn, say) joins it.
	Traceparent string `json:"traceparent,omitempty"`
	// Conversation is the caller's loop state, sent with a subagent.ask
	// call only (api/resume.go), so the supervisor holds what it needs to
	// end the waiting process and start it again from there. A child leaves
	// it out when the conversation would not fit a spawn frame (the payload,
	// it and an answer of MaxAnswer within the frame limit); such a
	// subagent keeps its process while it waits.
	Conversation *Conversation `json:"conversation,omitempty"`
}

// ToolResult answers a ToolCall. A refusal or a failed tool is a result with
// IsError set, never a protocol error. Field names follow MCP's CallToolResult.
type ToolResult struct {
	Content           []ToolContent   `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

// ToolContent is one content block of a tool result.
type ToolContent struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

// TextResult returns a tool result holding one text block.
func TextResult(text string, isError bool) ToolResult {
	return ToolResult{Content: []ToolContent{{Type: "text", Text: text}}, IsError: isError}
}

// Text joins the text blocks of the result.
func (r ToolResult) Text() string {
	var s string
	for i, c := range r.Content {
		if i > 0 {
			s += "\n"
		}
		s += c.Text
	}
	return s
}

// BlobPut asks the supervisor to keep a distillate too large to inline (store
// and reference). The supervisor keeps it for the task's lifetime plus a
// retention window and answers with a BlobRef, or with an error when the blob
// is over its size cap or the store is full.
type BlobPut struct {
	MediaType string `json:"media_type"` // e.g. text/plain, text/markdown, application/json
	Content   string `json:"content"`
}

// BlobRef answers a BlobPut: the blob's agent:// uri and its size in bytes.
type BlobRef struct {
	URI  string `json:"uri"`
	Size int    `json:"size"`
}

// BlobURIPrefix starts the uri of a blob the supervisor keeps. The A2A layer
// maps it to a URL on the service's own HTTPS server.
const BlobURIPrefix = "agent://blob/"

// BlobURI returns the uri of the blob with this id.
func BlobURI(id string) string { return BlobURIPrefix + id }

// ParseBlobURI returns the id of an agent://blob/ID uri. An id is 1 to 64
// bytes of [A-Za-z0-9_-].
func ParseBlobURI(uri string) (string, bool) {
	if !strings.HasPrefix(uri, BlobURIPrefix) {
		return "", false
	}
	id := uri[len(BlobURIPrefix):]
	return id, ValidBlobID(id)
}

// ValidBlobID reports whether id is 1 to 64 bytes of [A-Za-z0-9_-].
func ValidBlobID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// DecodeParams unmarshals a frame's params into v, refusing a frame without
// params.
func DecodeParams(f *Frame, v any) error {
	if len(f.Params) == 0 {
		return fmt.Errorf("%s: missing params", f.Method)
	}
	if err := json.Unmarshal(f.Params, v); err != nil {
		return fmt.Errorf("%s params: %w", f.Method, err)
	}
	return nil
}

// DecodeToolCall decodes a tool/call frame's params as DecodeParams does,
// except that the call's Args share the frame's memory rather than copy it
// (as DecodeFrameBody's Params share the body): a spawn's arguments carry
// the child's whole objective. The caller must not modify the frame's body.
func DecodeToolCall(f *Frame) (ToolCall, error) {
	var w struct {
		ToolCall
		Args sharedRaw `json:"args,omitempty"`
	}
	if err := DecodeParams(f, &w); err != nil {
		return ToolCall{}, err
	}
	call := w.ToolCall
	call.Args = json.RawMessage(w.Args)
	return call, nil
}

// Self-tools: served by the supervisor to every subagent, outside any scope.
// On the wire a self-tool is called by these names; a scoped tool is called as
// SERVER/TOOL (ToolRef.String).
const (
	ToolSpawn  = "subagent.spawn"
	ToolStatus = "subagent.status"
	ToolAwait  = "subagent.await"
	ToolCancel = "subagent.cancel"
	ToolAsk    = "subagent.ask"
	ToolAnswer = "subagent.answer"
	ToolSteer  = "subagent.steer"
)

// ToolSpec describes one tool a subagent may call: its wire name (a self-tool
// name or SERVER/TOOL), what it does, and the JSON Schema of its arguments. The
// supervisor puts the specs of the granted tools in the spawn payload, so the
// child offers its model exactly those (plus the self-tools).
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// ParseToolRef splits a wire tool name SERVER/TOOL. Self-tool names do not
// parse.
func ParseToolRef(name string) (ToolRef, bool) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			r := ToolRef{Server: name[:i], Tool: name[i+1:]}
			return r, r.Server != "" && r.Tool != ""
		}
	}
	return ToolRef{}, false
}
