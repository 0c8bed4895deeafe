package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/agent"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/mcp"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/telemetry"
)

// core holds the settings shared by serve and run: the intelligence, the root
// grant, and the supervision timings.
type core struct {
	intelligence *string
	model        *string
	keyFile      *string
	maxDepth     *int
	maxSteps     *int
	maxTokens    *int64
	maxChildren  *int
	nest         nestFlags
	deadline     *time.Duration
	drainTimeout *time.Duration
	spawnReady   *time.Duration
	drainGrace   *time.Duration
	killGrace    *time.Duration
	reapGrace    *time.Duration
	logLevel     *string
	mcp          mcpFlags

	childDeadline   *time.Duration
	execDeadline    *time.Duration
	progressTimeout *time.Duration
	pingInterval    *time.Duration
	pingMiss        *int
	rlimitAS        *string
	rlimitCPU       *time.Duration

	intelTimeout     *time.Duration
	intelRetries     *int
	intelBackoff     *time.Duration
	maxRepeats       *int
	distillateBudget *int

	key           string        // the intelligence API key, read from env or file
	tools         *mcp.Set      // the MCP servers, once newSupervisor made them; nil with none
	rlimitASB     uint64        // --rlimit-as in bytes, after validate
	blobRetention time.Duration // how long a stored distillate outlives its task; 0 is the supervisor's default

	// delegator, if set, starts nested spawns on non-local providers.
	delegator supervisor.Delegator
	// warmPool is the supervisor's warm pool size (serve's --warm-pool; a
	// one-shot run keeps none).
	warmPool int
}

func addCore(f *flags) *core {
	return &core{
		intelligence: f.string("intelligence", "AGENT_INTELLIGENCE", "builtin:demo", "the intelligence: builtin:demo, builtin:wait, or an OpenAI-compatible base URL"),
		model:        f.string("model", "AGENT_MODEL", "", "model name for an HTTP intelligence"),
		keyFile:      f.string("intelligence-key-file", "AGENT_INTELLIGENCE_KEY_FILE", "", "file holding the intelligence API key (or set AGENT_INTELLIGENCE_KEY; never on argv)"),
		maxDepth:     f.int("max-depth", "AGENT_MAX_DEPTH", 4, "subagent tree depth cap"),
		maxSteps:     f.int("max-steps", "AGENT_MAX_STEPS", 50, "per-subagent step cap"),
		maxTokens:    f.int64("max-tokens", "AGENT_MAX_TOKENS", 200000, "token budget of a run's root subagent"),
		maxChildren:  f.int("max-children", "AGENT_MAX_CHILDREN", 8, "per-node child cap"),
		nest:         addNestFlags(f),
		deadline:     f.duration("deadline", "AGENT_DEADLINE", 600*time.Second, "wall-clock deadline of a run (finite, at most 24h)"),
		drainTimeout: f.duration("drain-timeout", "AGENT_DRAIN_TIMEOUT", 25*time.Second, "whole-tree drain budget (keep it under the pod's termination grace)"),
		spawnReady:   f.duration("spawn-ready", "AGENT_SPAWN_READY", 2*time.Second, "a child must send ctrl/ready within this"),
		drainGrace:   f.duration("drain-grace", "AGENT_DRAIN_GRACE", 5*time.Second, "kill ladder: ctrl/cancel to SIGTERM"),
		killGrace:    f.duration("kill-grace", "AGENT_KILL_GRACE", 2*time.Second, "kill ladder: SIGTERM to SIGKILL"),
		reapGrace:    f.duration("reap-grace", "AGENT_REAP_GRACE", time.Second, "kill ladder: SIGKILL to reporting a process that will not reap"),
		logLevel:     f.string("log-level", "AGENT_LOG_LEVEL", "info", "log level: debug, info, warn, error"),

		childDeadline:   f.duration("child-deadline", "AGENT_CHILD_DEADLINE", 600*time.Second, "Detector A: every child's deadline is capped at this (the root's included)"),
		execDeadline:    f.duration("exec-deadline", "AGENT_EXEC_DEADLINE", 120*time.Second, "Detector A for exec children (applies once the gated exec tool exists; this build has none)"),
		progressTimeout: f.duration("progress-timeout", "AGENT_PROGRESS_TIMEOUT", 120*time.Second, "Detector B: a child that sends no frame but pongs for this long is stalled"),
		pingInterval:    f.duration("ping-interval", "AGENT_PING_INTERVAL", 5*time.Second, "Detector C: a ctrl/ping to every child this often"),
		pingMiss:        f.int("ping-miss", "AGENT_PING_MISS", 3, "Detector C: this many pings in a row unanswered is stuck"),
		rlimitAS:        f.string("rlimit-as", "AGENT_RLIMIT_AS", "0", "per-child RLIMIT_AS (address space), e.g. 4GiB; 0 inherits the supervisor's"),
		rlimitCPU:       f.duration("rlimit-cpu", "AGENT_RLIMIT_CPU", 0, "per-child RLIMIT_CPU (CPU time, whole seconds, rounded up); 0 inherits the supervisor's"),

		intelTimeout:     f.duration("intelligence-timeout", "AGENT_INTELLIGENCE_TIMEOUT", api.DefaultRequestTimeout, "timeout of one model request attempt (each also ends at the subagent's deadline)"),
		intelRetries:     f.int("intelligence-retries", "AGENT_INTELLIGENCE_RETRIES", api.DefaultRetries, "retries of a model request on 429, 5xx, a timeout or a connection error"),
		intelBackoff:     f.duration("intelligence-backoff", "AGENT_INTELLIGENCE_BACKOFF", api.DefaultRetryBackoff, "wait before the first retry when the server sends no Retry-After; doubles per retry"),
		maxRepeats:       f.int("max-repeats", "AGENT_MAX_REPEATS", api.DefaultMaxRepeats, "loop_detected after the same tool call with the same arguments this many times in a row"),
		distillateBudget: f.int("distillate-budget", "AGENT_DISTILLATE_BUDGET", api.DefaultDistillateBudget, "characters a result carries inline; a larger one is stored and returned as a reference with a summary"),
		mcp:              addMCPFlags(f),
	}
}

// minRlimitAS is the smallest --rlimit-as accepted: a Go child reserves address
// space for its heap metadata and thread stacks at start, and fails to start
// below about this much.
const minRlimitAS = 1 << 30

// validate checks every shared setting and names the bad one.
func (c *core) validate() error {
	positive := []struct {
		name string
		v    int64
	}{
		{"--max-depth", int64(*c.maxDepth)},
		{"--max-steps", int64(*c.maxSteps)},
		{"--max-tokens", *c.maxTokens},
		{"--max-children", int64(*c.maxChildren)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return usageError("%s must be positive (got %d)", p.name, p.v)
		}
	}
	if err := c.mcp.validate(); err != nil {
		return err
	}
	gate, tagger := c.gateGrant()
	if err := c.nest.validate(c.caps(), gate, tagger); err != nil {
		return err
	}
	durations := []struct {
		name string
		v    time.Duration
	}{
		{"--deadline", *c.deadline},
		{"--drain-timeout", *c.drainTimeout},
		{"--spawn-ready", *c.spawnReady},
		{"--drain-grace", *c.drainGrace},
		{"--kill-grace", *c.killGrace},
		{"--reap-grace", *c.reapGrace},
		{"--child-deadline", *c.childDeadline},
		{"--exec-deadline", *c.execDeadline},
		{"--progress-timeout", *c.progressTimeout},
		{"--ping-interval", *c.pingInterval},
	}
	for _, d := range durations {
		if d.v <= 0 {
			return usageError("%s must be a positive duration (got %s)", d.name, d.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--deadline", *c.deadline}, {"--child-deadline", *c.childDeadline}, {"--exec-deadline", *c.execDeadline}} {
		if d.v > api.MaxDeadline {
			return usageError("%s %s exceeds the maximum of %s: every deadline is finite", d.name, d.v, api.MaxDeadline)
		}
	}
	if *c.deadline > *c.childDeadline {
		return usageError("--deadline %s exceeds --child-deadline %s, which caps every child (the root included): raise --child-deadline too", *c.deadline, *c.childDeadline)
	}
	if *c.pingMiss <= 0 || *c.pingMiss > 1000 {
		return usageError("--ping-miss must be in [1, 1000] (got %d)", *c.pingMiss)
	}
	as, err := parseSize(*c.rlimitAS)
	if err != nil {
		return usageError("--rlimit-as: %v", err)
	}
	if as != 0 && as < minRlimitAS {
		return usageError("--rlimit-as %s is below %s: a child could not start (0 inherits)", *c.rlimitAS, formatSize(minRlimitAS))
	}
	c.rlimitASB = as
	if *c.rlimitCPU < 0 {
		return usageError("--rlimit-cpu must not be negative (got %s)", *c.rlimitCPU)
	}
	if *c.intelTimeout <= 0 {
		return usageError("--intelligence-timeout must be a positive duration (got %s)", *c.intelTimeout)
	}
	if *c.intelBackoff <= 0 || *c.intelBackoff > api.MaxRetryBackoff {
		return usageError("--intelligence-backoff must be in (0, %s] (got %s)", api.MaxRetryBackoff, *c.intelBackoff)
	}
	if *c.intelRetries < 0 || *c.intelRetries > 20 {
		return usageError("--intelligence-retries must be in [0, 20] (got %d)", *c.intelRetries)
	}
	if *c.maxRepeats < 2 {
		return usageError("--max-repeats must be at least 2 (got %d)", *c.maxRepeats)
	}
	if *c.distillateBudget < 200 {
		return usageError("--distillate-budget must be at least 200 characters (got %d)", *c.distillateBudget)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*c.logLevel)); err != nil {
		return usageError("--log-level %q: want debug, info, warn or error", *c.logLevel)
	}
	if err := agent.CheckIntelligence(c.intelligenceSpec()); err != nil {
		return usageError("--intelligence: %v", err)
	}
	c.key = os.Getenv(api.EnvIntelligenceKey)
	if *c.keyFile != "" {
		b, err := os.ReadFile(*c.keyFile)
		if err != nil {
			return usageError("--intelligence-key-file: %v", err)
		}
		c.key = strings.TrimSpace(string(b))
	}
	return nil
}

func (c *core) intelligenceSpec() api.Intelligence {
	retries := *c.intelRetries
	return api.Intelligence{
		Endpoint:       *c.intelligence,
		Model:          *c.model,
		RequestTimeout: api.Duration(*c.intelTimeout),
		Retries:        &retries,
		RetryBackoff:   api.Duration(*c.intelBackoff),
	}
}

// limits is the root grant of a run.
func (c *core) limits() api.Limits {
	return api.Limits{
		MaxSteps:    *c.maxSteps,
		MaxTokens:   *c.maxTokens,
		Deadline:    api.Duration(*c.deadline),
		MaxChildren: *c.maxChildren,

		MaxRepeats:       *c.maxRepeats,
		DistillateBudget: *c.distillateBudget,
	}
}

func (c *core) logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(*c.logLevel))
	// Every line with a span in its context (or from a logger tied to one)
	// carries trace_id and span_id.
	return slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})))
}

// newSupervisor builds the supervisor: it becomes the subreaper of its tree,
// hands children the environment with the intelligence key, and holds the MCP
// servers (which start connecting here; closeMCP closes them).
func (c *core) newSupervisor(log *slog.Logger, obs supervisor.Observer) (*supervisor.Supervisor, error) {
	if err := supervisor.EnableSubreaper(); err != nil {
		log.Warn("not a subreaper: orphaned grandchildren will reparent to init", "err", err)
	}
	env := childEnv(os.Environ())
	if c.key != "" {
		env = append(env, api.EnvIntelligenceKey+"="+c.key)
	}
	tools, err := c.newMCP(log)
	if err != nil {
		return nil, err
	}
	c.tools = tools
	var servers map[string]supervisor.ToolServer
	if tools != nil {
		servers = tools.ToolServers()
	}
	s, err := supervisor.New(supervisor.Config{
		Tools:      servers,
		ToolTags:   c.mcp.cfg.Tagger(),
		Env:        env,
		Logger:     log,
		SpawnReady: *c.spawnReady,
		DrainGrace: *c.drainGrace,
		KillGrace:  *c.killGrace,
		ReapGrace:  *c.reapGrace,
		Caps:       c.caps(),
		Observer:   obs,
		Blobs:      supervisor.BlobConfig{Retention: c.blobRetention},
		Delegator:  c.delegator,

		ChildDeadline:   *c.childDeadline,
		ExecDeadline:    *c.execDeadline,
		ProgressTimeout: *c.progressTimeout,
		PingInterval:    *c.pingInterval,
		PingMiss:        *c.pingMiss,
		RlimitAS:        c.rlimitASB,
		RlimitCPU:       uint64((*c.rlimitCPU + time.Second - 1) / time.Second),
		WarmPool:        c.warmPool,
	})
	if err != nil {
		c.closeMCP()
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	return s, nil
}

// childEnv is the environment a subagent inherits: only what a Go process, TLS,
// proxies and OpenTelemetry need. The supervisor's own settings (including
// AGENT_INSTRUCTION, whose value is an objective) never leak into children.
func childEnv(environ []string) []string {
	keep := map[string]bool{
		"PATH": true, "HOME": true, "TMPDIR": true, "LANG": true, "TZ": true,
		"GODEBUG": true, "GOMAXPROCS": true, "GOGC": true, "GOMEMLIMIT": true, "GOTRACEBACK": true,
		"SSL_CERT_FILE": true, "SSL_CERT_DIR": true,
		"HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true,
		"http_proxy": true, "https_proxy": true, "no_proxy": true,
	}
	var env []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if keep[k] || strings.HasPrefix(k, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}
