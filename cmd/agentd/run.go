package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/trigger"
)

// runConfig is `agentd run`: the shared settings, the root and its mode.
type runConfig struct {
	Core        coreConfig
	Instruction string
	Modes       modeConfig
	RunID       string
	Store       storeConfig
}

func parseRun(args []string, stderr io.Writer) (*runConfig, error) {
	c := &runConfig{}
	f := cli.NewFlags("run", stderr, "A supervisor and its root subagent, in one of the modes below. Prints each run's distillate;\nonce and workflow exit with the code of the root's terminal status (see `agentd --help`), a loop\nwith its last run's; schedule and reactive run until a signal.\n\n"+modesHelp)
	f.EnvString(&c.Instruction, "instruction", "AGENT_INSTRUCTION", "", "the objective of the run (required but in workflow mode)")
	addModes(f, &c.Modes, string(trigger.ModeOnce))
	f.EnvString(&c.RunID, "run-id", "AGENT_RUN_ID", "", "idempotency key of the run (default generated); a triggered run's is RUNID-SEQ-ATTEMPT; with --state-dir, a once run with this id that completed is not run again")
	addStore(f, &c.Store, false)
	addCore(f, &c.Core)
	f.Operands = "[TEXT (instead of --instruction)]"
	if err := f.Parse(args); err != nil {
		return nil, err
	}
	c.Core.LogLevelGiven = logLevelGiven(f)
	if f.NArg() > 0 {
		if c.Instruction != "" {
			return nil, cli.UsageError("unexpected arguments %q after --instruction", f.Args())
		}
		// `agentd run TEXT` reads like `agentd run --instruction TEXT`.
		c.Instruction = strings.Join(f.Args(), " ")
	}
	return c, nil
}

// Validate checks every setting and names the bad one. It reads no file and
// opens nothing.
func (c *runConfig) Validate() error {
	if err := c.Modes.Validate(mcpServerNames(&c.Core.MCP)); err != nil {
		return err
	}
	if c.Instruction == "" && c.Modes.mode() != trigger.ModeWorkflow {
		return errors.New("--instruction is required")
	}
	if err := c.Store.Validate(); err != nil {
		return err
	}
	return c.Core.Validate()
}

// runOnce is `agentd run`: config, then build and run under the signal policy.
func runOnce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := cli.Validated(parseRun(args, stderr))
	if err != nil {
		return err
	}
	if !c.Core.LogLevelGiven && cli.IsTerminal(stderr) {
		// A person at a terminal wants the result, not the supervisor's
		// info lines; warnings and errors still show.
		c.Core.LogLevel = "warn"
	}
	log := c.Core.logger(stderr)
	return runWithSignals(ctx, log, hupDrain, func(ctx context.Context) (program, error) {
		return buildOnce(ctx, c, log, stdout, stderr)
	})
}

// oneShot is a built `agentd run`. buildOnce opens the tracer provider, then
// the supervisor and its MCP sessions, and waits for every required MCP server
// to connect. Run starts the root and waits for its tree to end; on the first
// signal it drains instead. Either way it then closes the supervisor, then the
// tracer provider.
type oneShot struct {
	*tree
	closers        closers
	req            supervisor.StartRequest
	stdout, stderr io.Writer
	// trigger, for loop, schedule and reactive, runs the standing trigger
	// instead of one root.
	trigger func(context.Context) (api.SubagentResult, error)
	// record, for a once run with --run-id and --state-dir, keeps the run
	// as a task of the state directory's store.
	record *runRecord
}

func buildOnce(ctx context.Context, c *runConfig, log *slog.Logger, stdout, stderr io.Writer) (_ *oneShot, err error) {
	o := &oneShot{stdout: stdout, stderr: stderr}
	defer func() {
		if err != nil {
			o.closers.close()
		}
	}()
	if err := startTracing(ctx, c.Core.Tracing, log, &o.closers); err != nil {
		return nil, err
	}
	stateDir, err := c.Store.stateDir()
	if err != nil {
		return nil, err
	}
	var opt treeOptions
	if stateDir != "" && c.RunID != "" && c.Modes.mode() == trigger.ModeOnce {
		s, err := openSQLite(ctx, stateDir, storeLimits{}, log)
		if err != nil {
			return nil, err
		}
		o.closers.add(func() { s.Close() })
		o.record = &runRecord{store: s, runID: c.RunID, policy: c.Store.policy(), instruction: c.Instruction, log: log}
		opt.blobBackend = s // a stored distillate is printed again by the next run with this id
	}
	if opt.childStderr, err = childLogs(c.Core.AggregateLogs, stderr, &o.closers); err != nil {
		return nil, err
	}
	if o.tree, err = openTree(&c.Core, log, opt); err != nil {
		return nil, err
	}
	o.closers.add(o.tree.close)
	// Every required MCP server must be up before the root starts (exit 6).
	if err := o.tools.waitReady(ctx); err != nil {
		return nil, err
	}
	root, err := buildRoot(c.Instruction, c.RunID, &c.Core, &c.Modes, o.tools)
	if err != nil {
		return nil, err
	}
	o.req = root.request(trigger.Event{})
	if c.Modes.mode().SessionBacking() {
		o.trigger = c.Modes.triggerFor(trigger.Options{
			Runner:        supRunner{sup: o.sup, root: root, log: log},
			Governor:      o.sup.Governor(),
			Logger:        log,
			StopOnBreaker: true, // no operator can close it in a run
			Ended:         o.printEnded,
		}, o.tools, c.Core.MCP.MaxResult, stateDir)
	}
	return o, nil
}

// buildRoot is the root every run of a mode starts from: the instruction's
// contract, or for a workflow the steps of its file (read and checked here,
// bad ones exit 2) under a root named after it. The build's step: it reads
// files.
func buildRoot(instruction, runID string, core *coreConfig, m *modeConfig, tools *toolServers) (rootRequest, error) {
	root := rootRequest{tools: tools, payload: api.SpawnPayload{
		Contract:     api.OutputContract{Objective: instruction, OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Limits:       core.limits(),
		Telemetry:    api.Telemetry{RunID: runID},
		Intelligence: core.intelligenceSpec(),
	}}
	switch m.mode() {
	case trigger.ModeWorkflow:
		steps, err := loadWorkflow(m.Workflow, core.Caps)
		if err != nil {
			return root, err
		}
		root.workflow = steps
		if instruction == "" {
			root.payload.Contract.Objective = "the workflow " + m.Workflow
		}
	}
	return root, nil
}

// printEnded prints a triggered run's distillate as it ends, and its status
// when it did not complete.
func (o *oneShot) printEnded(ev trigger.Event, res api.SubagentResult) {
	o.print(res)
}

// print writes a result: the distillate on stdout (a stored one in full: no
// server outlives the run), the status on stderr unless completed.
func (o *oneShot) print(res api.SubagentResult) {
	out := res.Distillate.Text()
	if ref := res.Distillate.Reference; ref != nil {
		if id, ok := api.ParseBlobURI(ref.URI); ok {
			if b, ok := o.sup.Blob(id); ok {
				out = string(b.Content)
			}
		}
	}
	fmt.Fprintln(o.stdout, out)
	if res.Status != api.StatusCompleted {
		fmt.Fprintf(o.stderr, "agentd: run ended %s", res.Status)
		if res.Cause != "" {
			fmt.Fprintf(o.stderr, " (%s)", res.Cause)
		}
		if res.Detail != "" {
			fmt.Fprintf(o.stderr, ": %s", res.Detail)
		}
		fmt.Fprintln(o.stderr)
	}
}

// runTrigger runs the standing trigger until its stop rule, its breaker or
// the first signal. A loop exits with its last run's code; a breaker that
// opened with its last run's (at least 1); a signal drains (0 when clean).
func (o *oneShot) runTrigger(ctx context.Context) error {
	res, err := o.trigger(ctx)
	if ctx.Err() != nil {
		return o.drain()
	}
	switch {
	case errors.Is(err, trigger.ErrBreakerOpen):
		fmt.Fprintln(o.stderr, "agentd: the restart breaker opened: the session failed")
		code := api.ExitCode(res)
		if code == 0 {
			code = api.ExitFailure
		}
		return cli.ExitWith(code)
	case err != nil:
		return err
	}
	if code := api.ExitCode(res); code != 0 {
		return cli.ExitWith(code)
	}
	return nil
}

// Run starts the root and, once its tree has ended, prints the distillate
// and exits with the code of the root's status. The first signal (ctx) drains
// instead: a clean drain exits 0.
func (o *oneShot) Run(ctx context.Context) error {
	defer o.closers.close()
	if ctx.Err() != nil {
		return o.drain()
	}
	if o.trigger != nil {
		return o.runTrigger(ctx)
	}
	req := o.req
	if o.record != nil {
		next, res, done, err := o.record.begin(ctx, req)
		if err != nil {
			return err
		}
		if done {
			// The run has ended before (or its process was lost, under
			// --recover fail): its stored result, not a second run.
			o.print(res)
			return resultExit(res)
		}
		req = next
	}
	// The span of the root outlives a cancelled ctx: the drain ends the run.
	run, err := o.sup.Start(context.WithoutCancel(ctx), req)
	if err != nil {
		return err
	}
	if o.record != nil {
		o.record.started(ctx, run.Info().RunID)
	}
	select {
	case <-run.TreeDone():
		// The root has ended, and so has every subagent of its tree: children
		// it left running were stopped, detached ones ran to their end.
	case <-ctx.Done():
		// A root that had ended on its own by the signal has its result
		// recorded; one the drain ended was interrupted (record.drained).
		ended := false
		select {
		case <-run.TreeDone():
			ended = true
		default:
		}
		err := o.drain()
		select {
		case <-run.TreeDone():
			switch {
			case o.record == nil:
			case ended:
				o.record.finish(ctx, run.Result())
			default:
				o.record.drained(ctx, run.Result())
			}
		default:
			// A tree the drain did not end (unclean, exit 143) leaves the
			// record working: the next run resolves it by --recover.
		}
		return err
	}
	res := run.Result()
	if o.record != nil {
		o.record.finish(ctx, res)
	}
	o.print(res)
	return resultExit(res)
}

// resultExit is the exit of a run that ended with res: nil for completed,
// else the code of its status.
func resultExit(res api.SubagentResult) error {
	if code := api.ExitCode(res); code != 0 {
		return cli.ExitWith(code)
	}
	return nil
}

// drain runs the kill ladder over the tree within --drain-timeout.
func (o *oneShot) drain() error {
	ctx, cancel := context.WithTimeout(context.Background(), o.budget)
	defer cancel()
	if err := o.shutdown(ctx); err != nil {
		return err
	}
	o.log.Info(msgDrainedCleanly)
	return nil
}
