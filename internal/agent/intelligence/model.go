// Package intelligence holds the models a subagent's loop calls for its next
// turn: the builtin deterministic ones (builtin:demo, builtin:wait,
// builtin:script=FILE) and the clients of OpenAI-compatible Chat Completions
// endpoints and of Anthropic's Messages API. The loop (package agent) sees them through Model alone; this
// package imports api and never agent. Its errors keep the "agent:" prefix
// they had when it was part of package agent: a subagent reports them as a
// result's detail, and that text did not change.
package intelligence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
)

// Model is an intelligence: given the conversation so far, it produces the next
// assistant turn. It is all the loop needs of one. Implementations are safe
// for use by one loop at a time.
//
// A model that logs also has SetLogger(l *slog.Logger, content bool), which
// the subagent calls before the first Complete; content says whether prompts,
// answers and tool results may be logged (telemetry.log_content). Until
// then it logs nothing.
type Model interface {
	Complete(ctx context.Context, req *Request) (*Response, error)
}

// Role of a message in the conversation.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one turn of the conversation the loop keeps. It never leaves the
// child process: only the distillate travels up.
type Message struct {
	Role       Role
	Content    string
	ToolCalls  []ToolCall // assistant turns that call tools
	ToolCallID string     // tool turns: which call this answers
}

// ToolCall is a model's request to call one tool.
type ToolCall struct {
	ID   string
	Name string
	Args json.RawMessage
}

// ToolSpec describes a tool offered to the model. Name is what the model sees
// and calls (model APIs restrict tool names to [a-zA-Z0-9_-]); Wire is the name
// on the control channel (a self-tool name or SERVER/TOOL).
type ToolSpec struct {
	Name        string
	Wire        string
	Description string
	Parameters  json.RawMessage // JSON Schema of the arguments
}

// ModelToolName turns a wire tool name into one model APIs accept: every byte
// outside [a-zA-Z0-9_-] becomes "_", and "/" becomes "__" so scoped tools stay
// readable (github/search_issues -> github__search_issues).
func ModelToolName(wire string) string {
	var b strings.Builder
	for i := 0; i < len(wire); i++ {
		c := wire[i]
		switch {
		case c == '/':
			b.WriteString("__")
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// Request is one model call: the system prompt, the conversation, the tools.
type Request struct {
	System   string
	Messages []Message
	Tools    []ToolSpec
	// Objective is the contract's objective, for builtin models that answer from it.
	Objective string
	// AgentPath and Depth identify the caller, for scripted builtin models.
	AgentPath string
	Depth     int
	// OnText, if set, receives the assistant's text as the model produces
	// it: a streaming endpoint calls it once per chunk, in order, before
	// Complete returns; a model that does not stream may call it once with
	// the whole text, or never. Response.Content is the whole text either
	// way. It is called from Complete's goroutine and must not block.
	OnText func(chunk string)
	// Compaction marks the call that summarizes older turns to fit the
	// context window (the loop's summarize policy): System asks for the
	// summary, Messages hold the turns. A builtin model answers it without
	// taking a step of its script.
	Compaction bool
}

// FinishReason says why a model turn ended.
type FinishReason string

// Finish reasons, normalized across intelligences.
const (
	FinishStop          FinishReason = "stop"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishLength        FinishReason = "length"
	FinishRefusal       FinishReason = "refusal"
	FinishContentFilter FinishReason = "content_filter"
)

// Response is one assistant turn.
type Response struct {
	Content   string
	ToolCalls []ToolCall
	Usage     api.Usage // tokens of this call; Steps is ignored
	Finish    FinishReason
	Refusal   string
	// Endpoint names the endpoint that answered (its URL and model) when
	// the call went through failover; empty otherwise.
	Endpoint string
}

// ErrUnreachable wraps failures to reach the intelligence endpoint at all. The
// loop maps it to status crashed with cause intelligence_unreachable (exit 4).
var ErrUnreachable = errors.New("agent: intelligence endpoint unreachable")

// New returns the intelligence named by spec: builtin:demo, builtin:wait,
// or an HTTP base URL with a model name: of OpenAI-compatible Chat
// Completions (ending before /chat/completions, e.g.
// http://127.0.0.1:11434/v1) when spec.Dialect is openai or empty, of
// Anthropic's Messages API (ending before /messages, e.g.
// https://api.anthropic.com/v1) when it is anthropic. Another dialect is an
// error naming the setting. key is the API key for an HTTP endpoint (from
// the environment or a file, never argv); empty sends none. An HTTP
// endpoint, and any intelligence with fallbacks, is called through its
// endpoints' breakers and fails over from one to the next (failover.go); a
// fallback's key comes from the environment variable its KeyEnv names.
func New(spec api.Intelligence, key string) (Model, error) {
	if err := checkDialect(spec.Dialect); err != nil {
		return nil, err
	}
	if len(spec.Fallbacks) > 0 || !strings.HasPrefix(spec.Endpoint, "builtin:") {
		if err := spec.Validate(); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		return newFailover(spec, key, time.Now)
	}
	return newEndpoint(spec, key)
}

// newEndpoint returns the model of one endpoint.
func newEndpoint(spec api.Intelligence, key string) (Model, error) {
	if err := checkDialect(spec.Dialect); err != nil {
		return nil, err
	}
	name, arg, hasArg := strings.Cut(spec.Endpoint, "=")
	switch name {
	case "builtin:demo":
		if !hasArg {
			return newDemoModel(0), nil
		}
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 || d > time.Hour {
			return nil, fmt.Errorf("agent: %q: want builtin:demo=DURATION (a think time up to 1h, such as 2s)", spec.Endpoint)
		}
		return newDemoModel(d), nil
	case "builtin:wait":
		return waitModel{}, nil
	case "builtin:script":
		sc, err := loadScript(arg)
		if err != nil {
			return nil, err
		}
		return &scriptedModel{sc: sc}, nil
	}
	if strings.HasPrefix(spec.Endpoint, "builtin:") {
		return nil, fmt.Errorf("agent: unknown intelligence %q: the builtin ones are builtin:demo, builtin:wait and builtin:script=FILE", spec.Endpoint)
	}
	if spec.Dialect == api.DialectAnthropic {
		return newAnthropicModel(spec, key)
	}
	return newOpenAIModel(spec, key)
}

// checkDialect refuses a dialect other than openai (or empty) and anthropic.
func checkDialect(d string) error {
	switch d {
	case "", api.DialectOpenAI, api.DialectAnthropic:
		return nil
	}
	return fmt.Errorf("agent: intelligence dialect %q: want %s or %s (--intelligence-dialect, AGENT_INTELLIGENCE_DIALECT)", d, api.DialectOpenAI, api.DialectAnthropic)
}

// Check validates an intelligence spec at startup, so that bad config fails
// before any child is spawned. It opens no connection.
func Check(spec api.Intelligence) error {
	_, err := New(spec, "")
	return err
}

// estimateTokens is the builtin models' deterministic token count: one token
// per four bytes, rounded up.
func estimateTokens(s string) int64 { return int64((len(s) + 3) / 4) }

// requestTokens is estimateTokens of the request's text (its system prompt
// and every message's content), counted without writing that text out: a
// builtin:demo step, the warm pool's rehearsal among them, built the whole
// request as one string to take its length (12 KiB of fresh heap pages in
// the rehearsing child, figure 9).
func requestTokens(req *Request) int64 {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	return int64((n + 3) / 4)
}
