package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// MaxDeadline is the longest deadline a subagent can be granted. Every deadline
// is finite and mandatory (docs/ARCHITECTURE.md §5.3); this bound keeps a typo
// such as "6000h" from reading as "forever".
const MaxDeadline = 24 * time.Hour

// SpawnPayload is everything a subagent is handed, as the params of the first
// downward control frame (method "spawn"). It never travels on argv.
//
// AgentID, AgentPath and Depth are minted by the supervisor; whatever a parent
// asks for in their place is discarded at the subagent.spawn chokepoint.
type SpawnPayload struct {
	AgentID   string `json:"agent_id"`
	AgentPath string `json:"agent_path"`
	Depth     int    `json:"depth"`

	Contract  OutputContract `json:"contract"`
	Seed      ContextSeed    `json:"seed"`
	Scope     ToolScope      `json:"scope"`
	Limits    Limits         `json:"limits"`
	Telemetry Telemetry      `json:"telemetry"`

	// Tools describes the granted scoped tools (an agentd addition, filled by the
	// supervisor from Scope): the child offers its model exactly these plus the
	// self-tools.
	Tools []ToolSpec `json:"tools,omitempty"`

	// Intelligence names the model endpoint the subagent's loop talks to (an
	// agentd addition, docs/ARCHITECTURE.md §16): the supervisor never calls a
	// model, so the child must be told where to. Secrets (the API key) never travel here;
	// the child reads them from its environment.
	Intelligence Intelligence `json:"intelligence"`

	// Agent is the declared agent type the subagent runs as (the agents
	// file; nil without one): its system prompt and the peers its spawns
	// may use.
	Agent *AgentRole `json:"agent,omitempty"`

	// Resume, when set, starts the child from a stored conversation (a
	// subtree suspended while it waited in subagent.ask, api/resume.go)
	// instead of from its first prompt.
	Resume *Resume `json:"resume,omitempty"`
}

// Intelligence names a model endpoint: "builtin:NAME" for a builtin
// deterministic model, or an OpenAI-compatible base URL plus a model name.
type Intelligence struct {
	Endpoint string `json:"endpoint"`
	Model    string `json:"model,omitempty"`
	// Dialect is the wire format an HTTP endpoint speaks: DialectOpenAI
	// (Chat Completions, the default when empty) or DialectAnthropic
	// (Messages).
	Dialect string `json:"dialect,omitempty"`
	// RequestTimeout bounds one HTTP attempt; zero means
	// DefaultRequestTimeout. An attempt also ends at the subagent's deadline.
	RequestTimeout Duration `json:"request_timeout,omitempty"`
	// Retries is how many times a failed model call is tried again (429, 5xx,
	// a timed-out attempt, a connection error); nil means DefaultRetries.
	Retries *int `json:"retries,omitempty"`
	// RetryBackoff is the wait before the first retry when the server names
	// none (Retry-After); it doubles on each retry up to MaxRetryBackoff. Zero
	// means DefaultRetryBackoff.
	RetryBackoff Duration `json:"retry_backoff,omitempty"`

	// KeyEnv names the environment variable the child reads this endpoint's
	// API key from; empty means the key of EnvIntelligenceKey. Only the
	// name travels: the supervisor puts the value in the child's
	// environment (api/intelligence.go).
	KeyEnv string `json:"key_env,omitempty"`
	// Fallbacks are the endpoints tried after this one, in order, when its
	// breaker is open or a call to it fails (each with its own model,
	// dialect, timings and key source; their own Fallbacks are ignored).
	Fallbacks []Intelligence `json:"fallbacks,omitempty"`
	// Breaker is the policy of every endpoint's circuit breaker; the zero
	// value is the defaults.
	Breaker BreakerPolicy `json:"breaker,omitzero"`
	// Breakers is the service-wide state of the endpoints' breakers when
	// the child was spawned, as the supervisor aggregates it from the
	// children's reports: a fresh child starts from it instead of
	// rediscovering a dead endpoint.
	Breakers []EndpointBreaker `json:"breakers,omitempty"`
	// ContextWindow is the model's context window in tokens; zero takes the
	// window the model is known to have (docs/intelligence.md,
	// "Compaction"), or none. Near it, older turns are compacted.
	ContextWindow int64 `json:"context_window,omitempty"`
	// Compaction is the policy that compacts older turns near the context
	// window: CompactSummarize (the default when empty) or CompactTrim.
	Compaction string `json:"compaction,omitempty"`
	// MaxOutputTokens caps one answer: the max_tokens every Messages request
	// carries (the dialect requires it); zero means DefaultMaxOutputTokens.
	// Chat Completions requests do not send it.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
}

// Compaction policies (Intelligence.Compaction).
const (
	CompactSummarize = "summarize" // the model writes a summary of the older turns
	CompactTrim      = "trim"      // the tool results of older turns are shortened
)

// Dialects of an HTTP intelligence (Intelligence.Dialect).
const (
	DialectOpenAI    = "openai"
	DialectAnthropic = "anthropic"
)

// Defaults of an HTTP intelligence.
const (
	DefaultRequestTimeout = 60 * time.Second // the default progress timeout (120s, Detector B) is about twice this
	DefaultRetries        = 3
	DefaultRetryBackoff   = 500 * time.Millisecond
	MaxRetryBackoff       = 30 * time.Second
	// DefaultMaxOutputTokens is every Messages model's output limit or
	// below it, so that no model refuses the default.
	DefaultMaxOutputTokens = 4096
)

// Validate checks the intelligence's numbers: an endpoint, no negative
// timeout, retry count or backoff.
func (i Intelligence) Validate() error {
	switch {
	case i.Endpoint == "":
		return errors.New("intelligence.endpoint must be set")
	case i.RequestTimeout < 0:
		return errors.New("intelligence.request_timeout must not be negative")
	case i.Retries != nil && *i.Retries < 0:
		return errors.New("intelligence.retries must not be negative")
	case i.RetryBackoff < 0:
		return errors.New("intelligence.retry_backoff must not be negative")
	case i.ContextWindow < 0:
		return errors.New("intelligence.context_window must not be negative")
	case i.Compaction != "" && i.Compaction != CompactSummarize && i.Compaction != CompactTrim:
		return fmt.Errorf("intelligence.compaction %q: want summarize or trim", i.Compaction)
	case i.MaxOutputTokens < 0:
		return errors.New("intelligence.max_output_tokens must not be negative")
	}
	return i.validateFailover()
}

// OutputTokens returns the cap on one answer's tokens in force.
func (i Intelligence) OutputTokens() int64 {
	if i.MaxOutputTokens > 0 {
		return i.MaxOutputTokens
	}
	return DefaultMaxOutputTokens
}

// Timeout returns the per-attempt timeout in force.
func (i Intelligence) Timeout() time.Duration {
	if i.RequestTimeout > 0 {
		return i.RequestTimeout.D()
	}
	return DefaultRequestTimeout
}

// RetryCount returns the number of retries in force.
func (i Intelligence) RetryCount() int {
	if i.Retries != nil {
		return *i.Retries
	}
	return DefaultRetries
}

// Backoff returns the first retry's wait in force.
func (i Intelligence) Backoff() time.Duration {
	if i.RetryBackoff > 0 {
		return i.RetryBackoff.D()
	}
	return DefaultRetryBackoff
}

// OutputContract is what the parent wants back: an objective, a required shape,
// and optional guidance and boundaries. An empty objective is refused.
type OutputContract struct {
	Objective    string       `json:"objective"`
	OutputFormat OutputFormat `json:"output_format"`
	ToolGuidance string       `json:"tool_guidance,omitempty"`
	Boundaries   string       `json:"boundaries,omitempty"`
}

// Output format kinds.
const (
	FormatText     = "text"
	FormatMarkdown = "markdown"
	FormatJSON     = "json"
)

// OutputFormat is the required shape of the distillate: text, markdown, or JSON
// satisfying Schema. The zero value means text.
type OutputFormat struct {
	Kind   string          `json:"kind"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// ContextSeed is the narrowed context a parent chooses to pass: labeled slices,
// never a transcript. The protocol has no field for one.
type ContextSeed struct {
	Slices []SeedSlice `json:"slices,omitempty"`
}

// SeedSlice is one labeled piece of context.
type SeedSlice struct {
	Label   string      `json:"label"`
	Content SeedContent `json:"content"`
}

// SeedContent is either inline text or a reference to a resource (agent:// or a
// server URI); exactly one is set. The supervisor reads a reference when the
// child starts and hands the child what it read in Resolved.
type SeedContent struct {
	Text        string            `json:"text,omitempty"`
	ResourceRef string            `json:"resource_ref,omitempty"`
	Resolved    *ResolvedResource `json:"resolved,omitempty"`
}

// ToolScope is the set of (server, tool) pairs a subagent may call, with the
// Rule-of-Two trust legs the scope carries. It only ever narrows down the tree.
type ToolScope struct {
	Allow []ToolRef `json:"allow,omitempty"`
	Tags  ToolTags  `json:"tags"`
}

// Holds reports whether the scope allows ref.
func (s ToolScope) Holds(ref ToolRef) bool {
	for _, r := range s.Allow {
		if r == ref {
			return true
		}
	}
	return false
}

// ToolRef names one tool of one server. Self-tools use the server "subagent".
type ToolRef struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
}

// String formats the ref as SERVER/TOOL, the form refusal messages use.
func (r ToolRef) String() string { return r.Server + "/" + r.Tool }

// ToolTags are the Rule-of-Two legs a scope holds.
type ToolTags struct {
	UntrustedInput bool `json:"untrusted_input"`
	Sensitive      bool `json:"sensitive"`
	Egress         bool `json:"egress"`
}

// Trifecta reports whether all three legs are held at once.
func (t ToolTags) Trifecta() bool { return t.UntrustedInput && t.Sensitive && t.Egress }

// Limits bound one subagent. Deadline is mandatory and finite.
type Limits struct {
	MaxSteps    int      `json:"max_steps"`
	MaxTokens   int64    `json:"max_tokens"`
	Deadline    Duration `json:"deadline"`
	MaxChildren int      `json:"max_children"`
	// MaxRepeats ends the loop with loop_detected when the model asks for the
	// same tool with the same arguments this many times in a row (an agentd
	// addition; zero means DefaultMaxRepeats).
	MaxRepeats int `json:"max_repeats,omitempty"`
	// DistillateBudget is the most characters a distillate carries inline; a
	// larger one is stored through the supervisor and returned as a reference
	// with a summary (an agentd addition; zero means DefaultDistillateBudget).
	DistillateBudget int `json:"distillate_budget,omitempty"`
}

// Defaults of the Limits fields agentd adds.
const (
	DefaultMaxRepeats       = 3
	DefaultDistillateBudget = 8000
)

// Repeats returns the loop-detection threshold in force.
func (l Limits) Repeats() int {
	if l.MaxRepeats > 0 {
		return l.MaxRepeats
	}
	return DefaultMaxRepeats
}

// Budget returns the distillate budget in force, in characters.
func (l Limits) Budget() int {
	if l.DistillateBudget > 0 {
		return l.DistillateBudget
	}
	return DefaultDistillateBudget
}

// Telemetry is the correlation block: one run_id for the whole tree, the W3C
// trace context, and the log settings the child adopts: LogLevel (debug,
// info, warn or error; empty is info) and LogContent, whether prompts, model
// answers and tool arguments and results may appear in logs and span
// attributes.
type Telemetry struct {
	RunID        string `json:"run_id"`
	TraceID      string `json:"trace_id,omitempty"`
	ParentSpanID string `json:"parent_span_id,omitempty"`
	Traceparent  string `json:"traceparent,omitempty"`
	LogLevel     string `json:"log_level,omitempty"`
	LogContent   bool   `json:"log_content,omitempty"`
}

// Level returns the log level LogLevel names, info when it is empty; ok is
// false when it names none.
func (t Telemetry) Level() (level slog.Level, ok bool) {
	return ParseLogLevel(t.LogLevel)
}

// ParseLogLevel reads a log level as slog writes it (debug, info, warn, error,
// in any case, with an optional offset such as warn+2); the empty string is
// info.
func ParseLogLevel(s string) (slog.Level, bool) {
	var l slog.Level
	if s == "" {
		return slog.LevelInfo, true
	}
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo, false
	}
	return l, true
}

// ErrMissingObjective is the refusal for a contract without an objective. Its
// text is the chokepoint's refusal message (docs/ARCHITECTURE.md §5.1).
var ErrMissingObjective = errors.New("spawn denied: missing objective/output-contract")

// Validate checks the contract a parent supplies: an objective and a known format.
func (c OutputContract) Validate() error {
	if strings.TrimSpace(c.Objective) == "" {
		return ErrMissingObjective
	}
	return c.OutputFormat.Validate()
}

// Validate checks the format kind and, for JSON, that the schema is a JSON object
// or boolean.
func (f OutputFormat) Validate() error {
	switch f.Kind {
	case "", FormatText, FormatMarkdown:
		if len(f.Schema) != 0 {
			return fmt.Errorf("output_format: a schema is only allowed with kind %q", FormatJSON)
		}
		return nil
	case FormatJSON:
		if len(f.Schema) == 0 {
			return nil // any JSON value
		}
		var v any
		if err := json.Unmarshal(f.Schema, &v); err != nil {
			return fmt.Errorf("output_format.schema: %w", err)
		}
		switch v.(type) {
		case map[string]any, bool:
			return nil
		}
		return errors.New("output_format.schema: a JSON Schema is an object or a boolean")
	default:
		return fmt.Errorf("output_format.kind %q: want text, markdown or json", f.Kind)
	}
}

// Validate checks the seed: every slice labeled, exactly one content each.
func (s ContextSeed) Validate() error {
	for i, sl := range s.Slices {
		if strings.TrimSpace(sl.Label) == "" {
			return fmt.Errorf("seed.slices[%d]: missing label", i)
		}
		if (sl.Content.Text == "") == (sl.Content.ResourceRef == "") {
			return fmt.Errorf("seed.slices[%d] %q: exactly one of text or resource_ref", i, sl.Label)
		}
		if sl.Content.Resolved != nil && sl.Content.ResourceRef == "" {
			return fmt.Errorf("seed.slices[%d] %q: only a resource_ref slice is resolved", i, sl.Label)
		}
	}
	return nil
}

// Validate checks that every tool reference names a server and a tool.
func (s ToolScope) Validate() error {
	for i, r := range s.Allow {
		if r.Server == "" || r.Tool == "" || strings.Contains(r.Server, "/") {
			return fmt.Errorf("scope.allow[%d]: a tool is {server, tool}, both non-empty", i)
		}
	}
	return nil
}

// Validate checks the limits: positive steps and tokens, a finite positive
// deadline, a non-negative breadth cap.
func (l Limits) Validate() error {
	switch {
	case l.MaxSteps <= 0:
		return errors.New("limits.max_steps must be positive")
	case l.MaxTokens <= 0:
		return errors.New("limits.max_tokens must be positive")
	case l.Deadline <= 0:
		return errors.New("limits.deadline must be positive: every deadline is finite and mandatory")
	case l.Deadline.D() > MaxDeadline:
		return fmt.Errorf("limits.deadline %s exceeds the maximum of %s", l.Deadline, MaxDeadline)
	case l.MaxChildren < 0:
		return errors.New("limits.max_children must not be negative")
	case l.MaxRepeats < 0 || l.MaxRepeats == 1:
		return errors.New("limits.max_repeats must be at least 2 (or 0 for the default)")
	case l.DistillateBudget < 0:
		return errors.New("limits.distillate_budget must not be negative")
	}
	return nil
}

// Validate checks a whole payload as the child receives it: the minted identity
// present, and every part valid.
func (p *SpawnPayload) Validate() error {
	if p.AgentID == "" || p.AgentPath == "" {
		return errors.New("spawn payload: agent_id and agent_path are minted by the supervisor and must be set")
	}
	if p.Depth < 0 {
		return errors.New("spawn payload: negative depth")
	}
	if err := p.Contract.Validate(); err != nil {
		return err
	}
	if err := p.Seed.Validate(); err != nil {
		return err
	}
	if err := p.Scope.Validate(); err != nil {
		return err
	}
	if err := p.Limits.Validate(); err != nil {
		return err
	}
	if p.Telemetry.RunID == "" {
		return errors.New("spawn payload: telemetry.run_id must be set")
	}
	if _, ok := p.Telemetry.Level(); !ok {
		return fmt.Errorf("spawn payload: telemetry.log_level %q: want debug, info, warn or error", p.Telemetry.LogLevel)
	}
	if p.Intelligence.Endpoint == "" {
		return errors.New("spawn payload: intelligence.endpoint must be set")
	}
	if err := p.Intelligence.Validate(); err != nil {
		return fmt.Errorf("spawn payload: %w", err)
	}
	if p.Resume != nil {
		if err := p.Resume.Validate(); err != nil {
			return fmt.Errorf("spawn payload: %w", err)
		}
	}
	return nil
}
