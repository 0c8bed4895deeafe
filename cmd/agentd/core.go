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
	logLevel     *string
	mcp          mcpFlags

	key   string   // the intelligence API key, read from env or file
	tools *mcp.Set // the MCP servers, once newSupervisor made them; nil with none
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
		logLevel:     f.string("log-level", "AGENT_LOG_LEVEL", "info", "log level: debug, info, warn, error"),
		mcp:          addMCPFlags(f),
	}
}

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
	}
	for _, d := range durations {
		if d.v <= 0 {
			return usageError("%s must be a positive duration (got %s)", d.name, d.v)
		}
	}
	if *c.deadline > api.MaxDeadline {
		return usageError("--deadline %s exceeds the maximum of %s: every deadline is finite", *c.deadline, api.MaxDeadline)
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
	return api.Intelligence{Endpoint: *c.intelligence, Model: *c.model}
}

// limits is the root grant of a run.
func (c *core) limits() api.Limits {
	return api.Limits{
		MaxSteps:    *c.maxSteps,
		MaxTokens:   *c.maxTokens,
		Deadline:    api.Duration(*c.deadline),
		MaxChildren: *c.maxChildren,
	}
}

func (c *core) logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(*c.logLevel))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}))
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
		Caps:       c.caps(),
		Observer:   obs,
	})
	if err != nil {
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
