package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/agent/intelligence"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/mcp"
)

// coreConfig is the settings serve and run share: the intelligence, the root
// grant, the spawn caps, the supervision timings and the MCP servers. It holds
// no secret: the intelligence key is read when the supervisor is built.
type coreConfig struct {
	Intelligence string
	Model        string
	Dialect      string // --intelligence-dialect: openai or anthropic
	KeyFile      string // --intelligence-key-file; else AGENT_INTELLIGENCE_KEY (or ANTHROPIC_API_KEY for anthropic)
	MaxOutput    int64  // --intelligence-max-output-tokens
	IntelTimeout time.Duration
	IntelRetries int
	IntelBackoff time.Duration
	// Failover is the fallback endpoints and the breakers' policy.
	Failover failoverConfig
	// ContextWindow and Compaction are --context-window and --compaction:
	// the window older turns are compacted against, and how.
	ContextWindow int64
	Compaction    string

	// Caps are the subagent.spawn chokepoint's caps (--max-depth,
	// --max-children, --max-total-subagents, ...).
	Caps          supervisor.Caps
	AllowTrifecta bool
	MaxSteps      int
	MaxTokens     int64

	MaxRepeats       int
	DistillateBudget int

	Deadline     time.Duration
	DrainTimeout time.Duration
	SpawnReady   time.Duration
	DrainGrace   time.Duration
	KillGrace    time.Duration
	ReapGrace    time.Duration

	ChildDeadline   time.Duration
	ExecDeadline    time.Duration
	ProgressTimeout time.Duration
	PingInterval    time.Duration
	PingMiss        int
	RlimitAS        string // a size such as 4GiB; "0" inherits
	RlimitCPU       time.Duration

	// AllowExec turns the gated exec self-tool on (--allow-exec): the root
	// grant then holds subagent/exec, which counts as sensitive and egress in
	// the Rule of Two.
	AllowExec bool
	// Gates are the tool calls that wait for a person's yes (--approve).
	Gates supervisor.Gates
	// AskChargesDeadline counts a question's wait against the asking
	// subagent's deadline (--input-charges-deadline).
	AskChargesDeadline bool
	// InputHold is how long a root's question waits before its waiting
	// tree gives back its processes and slots (--input-hold; 0: never).
	InputHold time.Duration

	LogLevel string
	// LogContent lets prompts, model answers and tool arguments and results
	// into logs and span attributes, in every process of a tree
	// (--log-content).
	LogContent bool
	// AggregateLogs forwards each child's log lines through the supervisor
	// (--aggregate-logs, the default); off, children write their own lines to
	// agentd's stderr.
	AggregateLogs bool
	// LogLevelGiven: --log-level or AGENT_LOG_LEVEL was set (run logs at warn
	// on a terminal otherwise).
	LogLevelGiven bool
	// LogFormat is text or json; empty picks text when the log goes to a
	// terminal, JSON otherwise.
	LogFormat string
	MCP       mcpConfig
	// Tracing is the OTEL_* environment, which configures the trace
	// exporter.
	Tracing []string
}

func addCore(f *cli.Flags, c *coreConfig) {
	f.EnvString(&c.Intelligence, "intelligence", "AGENT_INTELLIGENCE", "builtin:demo", "the intelligence: builtin:demo[=THINK], builtin:wait, builtin:script=FILE, or an OpenAI-compatible base URL")
	f.EnvString(&c.Model, "model", "AGENT_MODEL", "", "model name for an HTTP intelligence")
	f.EnvString(&c.Dialect, "intelligence-dialect", "AGENT_INTELLIGENCE_DIALECT", api.DialectOpenAI, "the wire format of an HTTP intelligence: openai (Chat Completions) or anthropic (Messages)")
	f.EnvString(&c.KeyFile, "intelligence-key-file", "AGENT_INTELLIGENCE_KEY_FILE", "", "file holding the intelligence API key (or set AGENT_INTELLIGENCE_KEY, or ANTHROPIC_API_KEY for the anthropic dialect; never on argv)")
	f.EnvInt64(&c.MaxOutput, "intelligence-max-output-tokens", "AGENT_INTELLIGENCE_MAX_OUTPUT_TOKENS", api.DefaultMaxOutputTokens, "the cap on one model answer's tokens (max_tokens of every anthropic-dialect request)")
	f.EnvInt(&c.Caps.MaxDepth, "max-depth", "AGENT_MAX_DEPTH", 4, "subagent tree depth cap")
	f.EnvInt(&c.MaxSteps, "max-steps", "AGENT_MAX_STEPS", 50, "per-subagent step cap")
	f.EnvInt64(&c.MaxTokens, "max-tokens", "AGENT_MAX_TOKENS", 200000, "token budget of a run's root subagent")
	f.EnvInt(&c.Caps.MaxChildren, "max-children", "AGENT_MAX_CHILDREN", 8, "per-node child cap")
	addNestFlags(f, c)
	f.EnvDuration(&c.Deadline, "deadline", "AGENT_DEADLINE", 600*time.Second, "wall-clock deadline of a run (finite, at most 24h)")
	f.EnvDuration(&c.DrainTimeout, "drain-timeout", "AGENT_DRAIN_TIMEOUT", 25*time.Second, "whole-tree drain budget (keep it under the pod's termination grace)")
	f.EnvDuration(&c.SpawnReady, "spawn-ready", "AGENT_SPAWN_READY", 2*time.Second, "a child must send ctrl/ready within this")
	f.EnvDuration(&c.DrainGrace, "drain-grace", "AGENT_DRAIN_GRACE", 5*time.Second, "kill ladder: ctrl/cancel to SIGTERM")
	f.EnvDuration(&c.KillGrace, "kill-grace", "AGENT_KILL_GRACE", 2*time.Second, "kill ladder: SIGTERM to SIGKILL")
	f.EnvDuration(&c.ReapGrace, "reap-grace", "AGENT_REAP_GRACE", time.Second, "kill ladder: SIGKILL to reporting a process that will not reap")
	f.EnvString(&c.LogLevel, "log-level", "AGENT_LOG_LEVEL", "info", "log level: debug, info, warn, error; every subagent of a run logs at it too")
	f.EnvBool(&c.LogContent, "log-content", "AGENT_LOG_CONTENT", false, "let prompts, model answers and tool arguments and results into the logs (the debug lines of each model and tool call) and span attributes of every process of a tree")
	f.EnvBool(&c.AggregateLogs, "aggregate-logs", "AGENT_AGGREGATE_LOGS", true, "forward each subagent's log lines through the supervisor (marked child=true); =false: subagents write their own lines to agentd's stderr")
	f.EnvBool(&c.AllowExec, "allow-exec", "AGENT_ALLOW_EXEC", false, "turn on the exec self-tool: the root (and any child it grants subagent/exec) may run commands as supervised exec children, each with --exec-deadline; exec counts as sensitive and egress in the Rule of Two")
	f.EnvFuncList("approve", "AGENT_APPROVE", "a tool call that waits for a person's yes before it runs (the task goes input-required with the call): exec, tool:SERVER/TOOL or peer:NAME (a spawn on that peer); repeatable (env: ';'-separated); none by default", func(s string) error {
		return c.Gates.Add(s)
	})
	f.EnvDuration(&c.InputHold, "input-hold", "AGENT_INPUT_HOLD", 5*time.Minute, "after a task's question has waited this long, a tree whose every live subagent waits in subagent.ask ends its processes and gives back their slots; the answer starts them again from their stored conversations (0: never)")
	f.EnvBool(&c.AskChargesDeadline, "input-charges-deadline", "AGENT_INPUT_CHARGES_DEADLINE", false, "count the time a subagent's question (subagent.ask) waits for its answer against its deadline (by default the deadline moves by the wait; --input-timeout bounds a task's question)")
	f.EnvString(&c.LogFormat, "log-format", "AGENT_LOG_FORMAT", "", "log format: text or json (default: text when stderr is a terminal, JSON otherwise; children always log JSON to the supervisor, which renders their lines in this format)")

	f.EnvDuration(&c.ChildDeadline, "child-deadline", "AGENT_CHILD_DEADLINE", 600*time.Second, "Detector A: every child's deadline is capped at this (the root's included)")
	f.EnvDuration(&c.ExecDeadline, "exec-deadline", "AGENT_EXEC_DEADLINE", 120*time.Second, "Detector A for exec children (--allow-exec): each command is killed by the ladder at this deadline, or its caller's, whichever comes first")
	f.EnvDuration(&c.ProgressTimeout, "progress-timeout", "AGENT_PROGRESS_TIMEOUT", 120*time.Second, "Detector B: a child that sends no frame but pongs for this long is stalled")
	f.EnvDuration(&c.PingInterval, "ping-interval", "AGENT_PING_INTERVAL", 5*time.Second, "Detector C: a ctrl/ping to every child this often")
	f.EnvInt(&c.PingMiss, "ping-miss", "AGENT_PING_MISS", 3, "Detector C: this many pings in a row unanswered is stuck")
	f.EnvString(&c.RlimitAS, "rlimit-as", "AGENT_RLIMIT_AS", "0", "per-child RLIMIT_AS (address space), e.g. 4GiB; 0 inherits the supervisor's")
	f.EnvDuration(&c.RlimitCPU, "rlimit-cpu", "AGENT_RLIMIT_CPU", 0, "per-child RLIMIT_CPU (CPU time, whole seconds, rounded up); 0 inherits the supervisor's")

	f.EnvDuration(&c.IntelTimeout, "intelligence-timeout", "AGENT_INTELLIGENCE_TIMEOUT", api.DefaultRequestTimeout, "timeout of one model request attempt (each also ends at the subagent's deadline)")
	f.EnvInt(&c.IntelRetries, "intelligence-retries", "AGENT_INTELLIGENCE_RETRIES", api.DefaultRetries, "retries of a model request on 429, 5xx, a timeout or a connection error")
	f.EnvDuration(&c.IntelBackoff, "intelligence-backoff", "AGENT_INTELLIGENCE_BACKOFF", api.DefaultRetryBackoff, "wait before the first retry when the server sends no Retry-After; doubles per retry")
	addFailover(f, &c.Failover)
	f.EnvInt64(&c.ContextWindow, "context-window", "AGENT_CONTEXT_WINDOW", 0, "the model's context window in tokens, past 80% of which older turns are compacted (0: the window known for --model, or none)")
	f.EnvString(&c.Compaction, "compaction", "AGENT_COMPACTION", "", "how older turns are compacted near the context window: summarize (the default: the model writes a summary, its tokens counted) or trim (older tool results shortened)")
	f.EnvInt(&c.MaxRepeats, "max-repeats", "AGENT_MAX_REPEATS", api.DefaultMaxRepeats, "loop_detected after the same tool call with the same arguments this many times in a row")
	f.EnvInt(&c.DistillateBudget, "distillate-budget", "AGENT_DISTILLATE_BUDGET", api.DefaultDistillateBudget, "characters a result carries inline; a larger one is stored and returned as a reference with a summary")
	addMCPFlags(f, &c.MCP)
	c.Tracing = otelEnv(os.Environ())
}

// addNestFlags defines the chokepoint's caps beyond --max-depth and
// --max-children, and the Rule-of-Two override.
func addNestFlags(f *cli.Flags, c *coreConfig) {
	d := supervisor.DefaultCaps
	f.EnvInt(&c.Caps.MaxTotalSubagents, "max-total-subagents", "AGENT_MAX_TOTAL_SUBAGENTS", d.MaxTotalSubagents, "subagents one tree may ever create, its root included")
	f.EnvInt(&c.Caps.MaxInflight, "max-inflight", "AGENT_MAX_INFLIGHT", d.MaxInflight, "unfinished async children per parent")
	f.EnvInt(&c.Caps.SpawnBurst, "spawn-burst", "AGENT_SPAWN_BURST", d.SpawnBurst, "spawn-rate token bucket: burst of spawns per tree")
	f.EnvFloat64(&c.Caps.SpawnRate, "spawn-rate", "AGENT_SPAWN_RATE", d.SpawnRate, "spawn-rate token bucket: spawns per second per tree")
	f.EnvInt64(&c.Caps.TreeTokenCeiling, "tree-token-ceiling", "AGENT_TREE_TOKEN_CEILING", d.TreeTokenCeiling, "tokens one tree may use; past it the tree drains (exit 7 in one-shot)")
	f.EnvBool(&c.AllowTrifecta, "allow-trifecta", "AGENT_ALLOW_TRIFECTA", false, "let the root grant hold all three Rule-of-Two legs (untrusted_input, sensitive, egress); never passed to children")
}

// minRlimitAS is the smallest --rlimit-as accepted: a Go child reserves address
// space for its heap metadata and thread stacks at start, and fails to start
// below about this much.
const minRlimitAS = 1 << 30

// Bounds of the core settings.
const (
	maxPingMiss         = 1000
	maxIntelRetries     = 20
	minMaxRepeats       = 2
	minDistillateBudget = 200
)

// Validate checks every shared setting and names the bad one. It reads no
// file: a builtin:script file and the key file are read by the build.
func (c *coreConfig) Validate() error {
	for _, p := range []struct {
		name string
		v    int64
	}{
		{"--max-steps", int64(c.MaxSteps)},
		{"--max-tokens", c.MaxTokens},
	} {
		if p.v <= 0 {
			return fmt.Errorf("%s must be positive (got %d)", p.name, p.v)
		}
	}
	if err := c.validateCaps(); err != nil {
		return err
	}
	if err := c.validateTimings(); err != nil {
		return err
	}
	if err := c.validateIntelligence(); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "", logText, logJSON:
	default:
		return fmt.Errorf("--log-format %q: want text or json", c.LogFormat)
	}
	// OTEL_* settings agentd cannot honour (the error names the variable).
	if _, err := telemetry.ExportFromEnv(c.Tracing); err != nil {
		return err
	}
	return nil
}

// validateCaps checks the chokepoint caps, the MCP settings and the startup
// Rule-of-Two gate over the root grant.
func (c *coreConfig) validateCaps() error {
	if err := c.Caps.Validate(); err != nil {
		var ce *supervisor.CapError
		if errors.As(err, &ce) {
			return fmt.Errorf("--%s %v: must be positive and at most %v", strings.ReplaceAll(ce.Name, "_", "-"), ce.Value, ce.Bound)
		}
		return err
	}
	cfg, err := c.MCP.parse()
	if err != nil {
		return err
	}
	return checkRuleOfTwo(c.gateRefs(cfg), cfg.Tagger(), c.AllowTrifecta)
}

// gateRefs is what the startup Rule-of-Two gate evaluates: the MCP servers'
// tools as far as they can be known before any server is reached, and
// subagent/exec with --allow-exec.
func (c *coreConfig) gateRefs(cfg mcp.Config) []api.ToolRef {
	refs := cfg.GateRefs()
	if c.AllowExec {
		refs = append(refs, api.ExecRef)
	}
	return refs
}

// checkRuleOfTwo is the startup gate: a root grant whose tools together hold
// untrusted_input, sensitive and egress is bad config unless --allow-trifecta.
// An untagged tool counts as untrusted_input. The gate runs over grant, a
// superset of every root grant there can be (before any server is reached).
func checkRuleOfTwo(grant []api.ToolRef, tags supervisor.ToolTagger, allow bool) error {
	if err := supervisor.CheckRootGrant(supervisor.ScopeTags(grant, tags), allow); err != nil {
		return errors.New("the root tool grant holds untrusted_input, sensitive and egress at once (Rule of Two); narrow the tools or pass --allow-trifecta")
	}
	return nil
}

func (c *coreConfig) validateTimings() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--deadline", c.Deadline},
		{"--drain-timeout", c.DrainTimeout},
		{"--spawn-ready", c.SpawnReady},
		{"--drain-grace", c.DrainGrace},
		{"--kill-grace", c.KillGrace},
		{"--reap-grace", c.ReapGrace},
		{"--child-deadline", c.ChildDeadline},
		{"--exec-deadline", c.ExecDeadline},
		{"--progress-timeout", c.ProgressTimeout},
		{"--ping-interval", c.PingInterval},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s must be a positive duration (got %s)", d.name, d.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--deadline", c.Deadline}, {"--child-deadline", c.ChildDeadline}, {"--exec-deadline", c.ExecDeadline}} {
		if d.v > api.MaxDeadline {
			return fmt.Errorf("%s %s exceeds the maximum of %s: every deadline is finite", d.name, d.v, api.MaxDeadline)
		}
	}
	if c.Deadline > c.ChildDeadline {
		return fmt.Errorf("--deadline %s exceeds --child-deadline %s, which caps every child (the root included): raise --child-deadline too", c.Deadline, c.ChildDeadline)
	}
	if c.PingMiss <= 0 || c.PingMiss > maxPingMiss {
		return fmt.Errorf("--ping-miss must be in [1, %d] (got %d)", maxPingMiss, c.PingMiss)
	}
	if _, err := c.rlimitAS(); err != nil {
		return err
	}
	if c.RlimitCPU < 0 {
		return fmt.Errorf("--rlimit-cpu must not be negative (got %s)", c.RlimitCPU)
	}
	if c.InputHold < 0 {
		return fmt.Errorf("--input-hold must not be negative (got %s)", c.InputHold)
	}
	return nil
}

func (c *coreConfig) validateIntelligence() error {
	switch c.Dialect {
	case api.DialectOpenAI, api.DialectAnthropic:
	default:
		return fmt.Errorf("--intelligence-dialect %q: want %s or %s", c.Dialect, api.DialectOpenAI, api.DialectAnthropic)
	}
	if c.MaxOutput <= 0 {
		return fmt.Errorf("--intelligence-max-output-tokens must be positive (got %d)", c.MaxOutput)
	}
	if c.IntelTimeout <= 0 {
		return fmt.Errorf("--intelligence-timeout must be a positive duration (got %s)", c.IntelTimeout)
	}
	if c.IntelBackoff <= 0 || c.IntelBackoff > api.MaxRetryBackoff {
		return fmt.Errorf("--intelligence-backoff must be in (0, %s] (got %s)", api.MaxRetryBackoff, c.IntelBackoff)
	}
	if c.IntelRetries < 0 || c.IntelRetries > maxIntelRetries {
		return fmt.Errorf("--intelligence-retries must be in [0, %d] (got %d)", maxIntelRetries, c.IntelRetries)
	}
	if c.MaxRepeats < minMaxRepeats {
		return fmt.Errorf("--max-repeats must be at least %d (got %d)", minMaxRepeats, c.MaxRepeats)
	}
	if c.DistillateBudget < minDistillateBudget {
		return fmt.Errorf("--distillate-budget must be at least %d characters (got %d)", minDistillateBudget, c.DistillateBudget)
	}
	if err := c.Failover.validate(c); err != nil {
		return err
	}
	if c.ContextWindow < 0 {
		return fmt.Errorf("--context-window must not be negative (got %d)", c.ContextWindow)
	}
	if c.Compaction != "" && c.Compaction != api.CompactSummarize && c.Compaction != api.CompactTrim {
		return fmt.Errorf("--compaction %q: want summarize or trim", c.Compaction)
	}
	if c.scripted() {
		if c.Intelligence == scriptPrefix+"=" || !strings.HasPrefix(c.Intelligence, scriptPrefix+"=") {
			return fmt.Errorf("--intelligence %q: want %s=FILE", c.Intelligence, scriptPrefix)
		}
		return nil // the script is read (and checked) by the build
	}
	if err := intelligence.Check(c.intelligenceSpec()); err != nil {
		return fmt.Errorf("--intelligence: %v", err)
	}
	return nil
}

// scriptPrefix names the builtin intelligence that plays a script file.
const scriptPrefix = "builtin:script"

// scripted reports whether the intelligence is a builtin:script, whose file
// the build reads.
func (c *coreConfig) scripted() bool {
	name, _, _ := strings.Cut(c.Intelligence, "=")
	return name == scriptPrefix
}

// rlimitAS is --rlimit-as in bytes (0 inherits).
func (c *coreConfig) rlimitAS() (uint64, error) {
	as, err := parseSize(c.RlimitAS)
	if err != nil {
		return 0, fmt.Errorf("--rlimit-as: %v", err)
	}
	if as != 0 && as < minRlimitAS {
		return 0, fmt.Errorf("--rlimit-as %s is below %s: a child could not start (0 inherits)", c.RlimitAS, formatSize(minRlimitAS))
	}
	return as, nil
}

func (c *coreConfig) intelligenceSpec() api.Intelligence {
	retries := c.IntelRetries
	spec := api.Intelligence{
		Endpoint:        c.Intelligence,
		Model:           c.Model,
		Dialect:         c.Dialect,
		MaxOutputTokens: c.MaxOutput,
		RequestTimeout:  api.Duration(c.IntelTimeout),
		Retries:         &retries,
		RetryBackoff:    api.Duration(c.IntelBackoff),
		ContextWindow:   c.ContextWindow,
		Compaction:      c.Compaction,
	}
	c.Failover.apply(&spec)
	return spec
}

// limits is the root grant of a run.
func (c *coreConfig) limits() api.Limits {
	return api.Limits{
		MaxSteps:    c.MaxSteps,
		MaxTokens:   c.MaxTokens,
		Deadline:    api.Duration(c.Deadline),
		MaxChildren: c.Caps.MaxChildren,

		MaxRepeats:       c.MaxRepeats,
		DistillateBudget: c.DistillateBudget,
	}
}

// otelEnv is the OTEL_* part of environ.
func otelEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, "OTEL_") {
			out = append(out, kv)
		}
	}
	return out
}
