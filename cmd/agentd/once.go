package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// runConfig is `agentd run`: the shared settings and the one run.
type runConfig struct {
	Core        coreConfig
	Instruction string
	Mode        string
	RunID       string
}

// modeOnce is the only run mode this build has.
const modeOnce = "once"

func parseRun(args []string, stderr io.Writer) (*runConfig, error) {
	c := &runConfig{}
	f := newFlags("run", stderr, "One-shot: a supervisor and one root subagent. Prints the distillate and exits with\nthe code of the root's terminal status (see `agentd --help`).")
	f.stringVar(&c.Instruction, "instruction", "AGENT_INSTRUCTION", "", "the objective of the run (required)")
	f.stringVar(&c.Mode, "mode", "AGENT_MODE", modeOnce, "run mode; this build runs \"once\"")
	f.stringVar(&c.RunID, "run-id", "AGENT_RUN_ID", "", "idempotency key of the run (default generated)")
	addCore(f, &c.Core)
	f.args = "[TEXT (instead of --instruction)]"
	if err := f.parse(args); err != nil {
		return nil, err
	}
	if f.NArg() > 0 {
		if c.Instruction != "" {
			return nil, usageError("unexpected arguments %q after --instruction", f.Args())
		}
		// `agentd run TEXT` reads like `agentd run --instruction TEXT`.
		c.Instruction = strings.Join(f.Args(), " ")
	}
	return c, nil
}

// Validate checks every setting and names the bad one. It reads no file and
// opens nothing.
func (c *runConfig) Validate() error {
	if c.Instruction == "" {
		return errors.New("--instruction is required")
	}
	if c.Mode != modeOnce {
		return fmt.Errorf("--mode %q: this build runs only %q (loop, reactive, schedule and workflow are not implemented)", c.Mode, modeOnce)
	}
	return c.Core.Validate()
}

// runOnce is `agentd run`: config, then build and run under the signal policy.
func runOnce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := validated(parseRun(args, stderr))
	if err != nil {
		return err
	}
	log := c.Core.logger(stderr)
	return runWithSignals(ctx, log, func(ctx context.Context) (program, error) {
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
	if o.tree, err = openTree(&c.Core, log, treeOptions{}); err != nil {
		return nil, err
	}
	o.closers.add(o.tree.close)
	// Every required MCP server must be up before the root starts (exit 6).
	if err := o.tools.waitReady(ctx); err != nil {
		return nil, err
	}
	o.req = supervisor.StartRequest{Payload: api.SpawnPayload{
		Contract:     api.OutputContract{Objective: c.Instruction, OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Scope:        o.tools.rootScope(),
		Limits:       c.Core.limits(),
		Telemetry:    api.Telemetry{RunID: c.RunID},
		Intelligence: c.Core.intelligenceSpec(),
	}}
	return o, nil
}

// Run starts the root and, once its tree has ended, prints the distillate
// and exits with the code of the root's status. The first signal (ctx) drains
// instead: a clean drain exits 0.
func (o *oneShot) Run(ctx context.Context) error {
	defer o.closers.close()
	if ctx.Err() != nil {
		return o.drain()
	}
	// The span of the root outlives a cancelled ctx: the drain ends the run.
	run, err := o.sup.Start(context.WithoutCancel(ctx), o.req)
	if err != nil {
		return err
	}
	select {
	case <-run.TreeDone():
		// The root has ended, and so has every subagent of its tree: children
		// it left running were stopped, detached ones ran to their end.
	case <-ctx.Done():
		return o.drain()
	}
	res := run.Result()
	out := res.Distillate.Text()
	if ref := res.Distillate.Reference; ref != nil {
		// No server outlives a one-shot run: print the whole stored result.
		if id, ok := api.ParseBlobURI(ref.URI); ok {
			if b, ok := o.sup.Blob(id); ok {
				out = string(b.Content)
			}
		}
	}
	fmt.Fprintln(o.stdout, out)
	if res.Status != api.StatusCompleted {
		fmt.Fprintf(o.stderr, "agentd: run ended %s", res.Status)
		if res.Detail != "" {
			fmt.Fprintf(o.stderr, ": %s", res.Detail)
		}
		fmt.Fprintln(o.stderr)
	}
	if code := api.ExitCode(res); code != 0 {
		return exitWith(code)
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
