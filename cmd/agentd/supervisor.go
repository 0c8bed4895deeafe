package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/agent/intelligence"
	"github.com/agentd/agentd/internal/secretfile"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/blob"
)

// treeOptions are what serve adds to the shared settings when it builds the
// supervisor; the zero value is a one-shot run's.
type treeOptions struct {
	observer      supervisor.Observer      // nested subagents as A2A tasks
	delegator     supervisor.Delegator     // nested spawns on non-local providers
	warmPool      int                      // children started ahead of time
	blobRetention time.Duration            // how long a stored distillate outlives its task; 0 is the supervisor's default
	childStderr   *os.File                 // children's own stderr (--aggregate-logs=false); nil forwards their lines
	budget        supervisor.ProcessBudget // the service-wide bound on live subagent processes (admission); nil for none
	blobBackend   blob.Backend             // where stored distillates are kept; nil: in memory
	blobs         blob.Config              // the blob store's bounds (serve's budgets); zero fields are the defaults
	maxFrame      int                      // the control frame limit (api.FrameLimit of serve's --max-message); 0 is the default
	// agentTypes looks up the agent type a spawn names (--agents); nil
	// refuses every named type.
	agentTypes func(name string) (*api.AgentType, bool)
	// keyEnv are the child environment entries of the declared endpoints'
	// keys (--agents); a reload replaces them (Supervisor.SetKeyEnv).
	keyEnv []string
}

// childGOGC is every agentd child's GOGC: the runtime's default, set so that
// the supervisor's own tuning never reaches a child. Figure 9 measured 25 and
// 50 no smaller than 100 for a child in a model call (its heap stays under the
// runtime's 4 MB minimum goal either way); the memory limit is what returns
// its free pages.
const childGOGC = 100

// childGOMAXPROCS is every agentd child's GOMAXPROCS: one P, since a child
// spends its life waiting on a model, and each further P costs a child its own
// partly filled spans, threads and GC state (figure 9: about 0.3 MiB of a
// child in a model call). A child whose spawn payload is large returns to the
// runtime's default before decoding it (internal/agent, fitProcs).
const childGOMAXPROCS = 1

// childGODEBUG leads every agentd child's GODEBUG (an operator's GODEBUG
// follows it and wins where both set one): no heap profile sampling and no
// profile stacks. A child serves no profile, and the sampling's buckets (its
// hash table's pages) and each thread's two 128-frame stack buffers were
// about 30 KiB of an idle child's private memory (performance.md, figure 9).
// AGENT_CHILD_MEMDUMP, whose heap profile needs both, turns it off
// (childGODEBUGFor).
const childGODEBUG = "memprofilerate=0,profstackdepth=0"

// childGODEBUGFor is Config.ChildGODEBUG for a supervisor whose environment is
// environ: childGODEBUG, or nothing when agent.EnvMemDump asks the children
// for their heap profiles.
func childGODEBUGFor(environ []string) string {
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); k == agent.EnvMemDump && v != "" {
			return ""
		}
	}
	return childGODEBUG
}

// openSupervisor builds the supervisor of c: it checks a builtin:script file,
// reads the intelligence key, makes this process the subreaper of its tree,
// opens the MCP sessions (which start connecting) and hands children the
// environment with the key. The caller closes the returned toolServers.
func openSupervisor(c *coreConfig, log *slog.Logger, opt treeOptions) (*supervisor.Supervisor, *toolServers, error) {
	key, err := loadIntelligence(c)
	if err != nil {
		return nil, nil, err
	}
	tools, mcfg, err := openMCP(&c.MCP, log)
	if err != nil {
		return nil, nil, err
	}
	tools.exec = c.AllowExec
	if err := supervisor.EnableSubreaper(); err != nil {
		log.Warn("not a subreaper: orphaned grandchildren will reparent to init", "err", err)
	}
	env := childEnv(os.Environ())
	if key != "" {
		env = append(env, api.EnvIntelligenceKey+"="+key)
	}
	fallbackKeys, err := c.Failover.keyEnv()
	if err != nil {
		tools.close()
		return nil, nil, err
	}
	env = append(env, fallbackKeys...)
	var servers map[string]supervisor.ToolServer
	if tools.set != nil {
		servers = tools.set.ToolServers()
	}
	rlimitAS, _ := c.rlimitAS() // checked by Validate
	blobs := opt.blobs
	if blobs.Retention == 0 {
		blobs.Retention = opt.blobRetention
	}
	blobs.Backend = opt.blobBackend
	s, err := supervisor.New(supervisor.Config{
		Tools:      servers,
		ToolTags:   mcfg.Tagger(),
		Env:        env,
		Logger:     log,
		SpawnReady: c.SpawnReady,
		DrainGrace: c.DrainGrace,
		KillGrace:  c.KillGrace,
		ReapGrace:  c.ReapGrace,
		Caps:       c.Caps,
		Observer:   opt.observer,
		Blobs:      blobs,
		MaxFrame:   opt.maxFrame,
		Delegator:  opt.delegator,

		ChildDeadline:   c.ChildDeadline,
		ExecDeadline:    c.ExecDeadline,
		ProgressTimeout: c.ProgressTimeout,
		PingInterval:    c.PingInterval,
		PingMiss:        c.PingMiss,
		RlimitAS:        rlimitAS,
		RlimitCPU:       uint64((c.RlimitCPU + time.Second - 1) / time.Second),
		// A child's Go runtime is set for a child's share, not for the
		// supervisor's heap (whose GOGC and GOMEMLIMIT childEnv passes on):
		// 16 MiB, above the admitted cost (admit.ChildCost), since a Go
		// limit at 6-8 MiB made an idle child collect all the time and grow
		// (performance.md, figure 9); --child-memory is the hard bound.
		ChildMemoryLimit: 16 * admit.MiB,
		ChildGOGC:        childGOGC,
		ChildGOMAXPROCS:  childGOMAXPROCS,
		ChildGODEBUG:     childGODEBUGFor(os.Environ()),
		WarmPool:         opt.warmPool,
		PoolRehearse:     true, // the children are this binary's subagent mode

		AllowExec: c.AllowExec,
		Gates:     c.Gates,

		AskChargesDeadline: c.AskChargesDeadline,
		InputHold:          c.InputHold,
		LogLevel:           c.level(),
		LogContent:         c.LogContent,
		ChildStderr:        opt.childStderr,
		Budget:             opt.budget,
		AgentTypes:         opt.agentTypes,
		KeyEnv:             opt.keyEnv,
	})
	if err != nil {
		tools.close()
		return nil, nil, fmt.Errorf("start supervisor: %w", err)
	}
	return s, tools, nil
}

// childLogs is where subagents write their own log lines with
// --aggregate-logs=false: agentd's stderr itself when it is a file, else a
// pipe copied to it (closed by cl, after the supervisor, which cl closes
// later, has reaped every child). It is nil when the lines are aggregated.
func childLogs(aggregate bool, stderr io.Writer, cl *closers) (*os.File, error) {
	if aggregate {
		return nil, nil
	}
	if f, ok := stderr.(*os.File); ok {
		return f, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("the subagents' stderr pipe: %w", err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(stderr, r)
		r.Close()
	}()
	cl.add(func() {
		w.Close()
		// A process that outlived its tree (it left its process group) may
		// still hold the pipe: its lines are not waited for.
		select {
		case <-copied:
		case <-time.After(time.Second):
			r.Close()
		}
	})
	return w, nil
}

// loadIntelligence reads what the intelligence needs from files: a
// builtin:script is read and checked, and the API key comes from
// --intelligence-key-file, else AGENT_INTELLIGENCE_KEY, else (for the
// anthropic dialect) ANTHROPIC_API_KEY, the variable Anthropic's own tools
// read; empty when none is set. An error is bad config.
func loadIntelligence(c *coreConfig) (key string, err error) {
	if c.scripted() {
		if err := intelligence.Check(c.intelligenceSpec()); err != nil {
			return "", cli.UsageError("--intelligence: %v", err)
		}
	}
	if c.KeyFile == "" {
		key := os.Getenv(api.EnvIntelligenceKey)
		if key == "" && c.Dialect == api.DialectAnthropic {
			key = os.Getenv(envAnthropicKey)
		}
		return key, nil
	}
	b, err := secretfile.Read(c.KeyFile)
	if err != nil {
		return "", cli.UsageError("--intelligence-key-file: %v", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// envAnthropicKey is the anthropic dialect's fallback key variable.
const envAnthropicKey = "ANTHROPIC_API_KEY"

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
		api.EnvChildMemStats: true, agent.EnvMemDump: true, // diagnostics, off unless set
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
