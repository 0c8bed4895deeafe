package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/supervisor/trigger"
)

// maxWarmPool bounds --warm-pool: the pool is a latency cache, not capacity.
const maxWarmPool = 64

// version is the service version the agent card reports.
var version = "0.1.0"

// serveConfig is `agentd serve`: the shared settings, the listener, the task
// store, the mesh, the identity and observability.
type serveConfig struct {
	Core          coreConfig
	Listen        string
	PublicURL     string
	TaskCapacity  int
	TaskRetention time.Duration
	WarmPool      int
	// Console serves the operator console at /ui/ (to operators only).
	Console bool
	// Instruction and Modes are the service's standing trigger: with a
	// mode, the service also runs its own root (each run an A2A task).
	Instruction string
	Modes       modeConfig
	Admission   admissionConfig
	Mesh        meshConfig
	Identity    identityConfig
	Observe     observeConfig
	Store       storeConfig
	Budgets     budgetConfig
	// AgentsFile is --agents: the declared card and agent types, reloaded
	// on SIGHUP (agents.go); "" runs as the flags say.
	AgentsFile string
}

func parseServe(args []string, stderr io.Writer) (*serveConfig, error) {
	c := &serveConfig{}
	f := cli.NewFlags("serve", stderr, "Runs the A2A mesh service: a supervisor plus the A2A JSON-RPC endpoint.\nPlain http is allowed only on a loopback --listen address. With --mode, the service also\nruns --instruction as a standing trigger: each run is an A2A task (tasks/get, ListTasks and\na2a.Tree show it; its metadata holds the trigger under agentd/trigger*), owned by the service,\nso operators see it. once and workflow run one task at start. A session's restart breaker is\nin a2a.Tree and a2a.CloseBreaker closes it.\n\n"+modesHelp)
	f.EnvString(&c.Instruction, "instruction", "AGENT_INSTRUCTION", "", "with --mode: the objective of the service's own root (not needed for workflow)")
	addModes(f, &c.Modes, "")
	f.EnvString(&c.Listen, "listen", "AGENT_LISTEN", "127.0.0.1:8080", "address to listen on (host:port)")
	f.EnvString(&c.PublicURL, "public-url", "AGENT_PUBLIC_URL", "", "the URL peers reach this service at, for the agent card (default derived from --listen)")
	f.EnvInt(&c.TaskCapacity, "task-capacity", "AGENT_TASK_CAPACITY", 10000, "tasks the store holds; finished ones are evicted oldest first")
	f.EnvDuration(&c.TaskRetention, "task-retention", "AGENT_TASK_RETENTION", time.Hour, "how long a finished task stays readable")
	f.EnvBool(&c.Console, "console", "AGENT_CONSOLE", true, "serve the operator console at /ui/ and its event stream at /ui/events (operators only)")
	f.EnvInt(&c.WarmPool, "warm-pool", "AGENT_WARM_POOL", 2, "children started ahead of time, waiting for their payload (0 turns the pool off)")
	addAdmission(f, &c.Admission)
	addStore(f, &c.Store, true)
	addMesh(f, &c.Mesh)
	addCore(f, &c.Core)
	addIdentity(f, &c.Identity)
	addObserve(f, &c.Observe)
	addBudgets(f, &c.Budgets)
	f.EnvString(&c.AgentsFile, "agents", "AGENT_AGENTS_FILE", "", "the declared agents file (JSON): the card's name, description and skills, and named agent types (intelligence, system prompt, tools, limits); reloaded on SIGHUP")
	if err := f.Parse(args); err != nil {
		return nil, err
	}
	c.Core.LogLevelGiven = logLevelGiven(f)
	if f.NArg() > 0 {
		return nil, cli.UsageError("serve takes no arguments (got %q)", f.Args())
	}
	return c, nil
}

// Validate checks every setting and names the bad one. It reads no file and
// opens nothing.
func (c *serveConfig) Validate() error {
	if err := c.Core.Validate(); err != nil {
		return err
	}
	if err := c.Modes.Validate(mcpServerNames(&c.Core.MCP)); err != nil {
		return err
	}
	switch m := c.Modes.mode(); {
	case m == "" && c.Instruction != "":
		return errors.New("--instruction is for a service with --mode (a standing trigger)")
	case m != "" && m != trigger.ModeWorkflow && c.Instruction == "":
		return fmt.Errorf("--mode %s needs --instruction", m)
	}
	if err := c.Store.Validate(); err != nil {
		return err
	}
	if c.TaskCapacity <= 0 {
		return fmt.Errorf("--task-capacity must be positive (got %d)", c.TaskCapacity)
	}
	if c.TaskRetention <= 0 {
		return fmt.Errorf("--task-retention must be a positive duration (got %s)", c.TaskRetention)
	}
	if err := c.Budgets.validate(c.TaskCapacity); err != nil {
		return err
	}
	if c.WarmPool < 0 || c.WarmPool > maxWarmPool {
		return fmt.Errorf("--warm-pool must be in [0, %d] (got %d)", maxWarmPool, c.WarmPool)
	}
	if err := checkPublicURL(c.PublicURL); err != nil {
		return err
	}
	if err := c.Admission.validate(); err != nil {
		return err
	}
	if err := c.Mesh.validate(c.Identity.tls()); err != nil {
		return err
	}
	if err := c.Observe.validate(); err != nil {
		return err
	}
	return c.Identity.validate(c.Listen)
}

// checkPublicURL checks --public-url: empty (derived from --listen), or an
// absolute http(s) URL without credentials, which peers and clients are given
// in the agent card and in the URLs of stored distillates.
func checkPublicURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("--public-url %q: want an absolute http(s) URL such as https://agentd.example:8443/", raw)
	}
	return nil
}

// runServe is `agentd serve`: config, then build and run under the signal
// policy.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := cli.Validated(parseServe(args, stderr))
	if err != nil {
		return err
	}
	log := c.Core.logger(stderr)
	return runWithSignals(ctx, log, hupReload, func(ctx context.Context) (program, error) {
		return buildService(ctx, c, log, stderr)
	})
}
