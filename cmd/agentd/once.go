package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

func runOnce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("run", stderr, "One-shot: a supervisor and one root subagent. Prints the distillate and exits with\nthe code of the root's terminal status (see `agentd --help`).")
	instruction := f.string("instruction", "AGENT_INSTRUCTION", "", "the objective of the run (required)")
	mode := f.string("mode", "AGENT_MODE", "once", "run mode; this build runs \"once\"")
	runID := f.string("run-id", "AGENT_RUN_ID", "", "idempotency key of the run (default generated)")
	c := addCore(f)
	f.args = "[TEXT (instead of --instruction)]"
	if err := f.parse(args); err != nil {
		return err
	}
	if *instruction == "" && f.NArg() > 0 {
		// `agentd run TEXT` reads like `agentd run --instruction TEXT`.
		s := ""
		for i, a := range f.Args() {
			if i > 0 {
				s += " "
			}
			s += a
		}
		*instruction = s
	} else if f.NArg() > 0 {
		return usageError("unexpected arguments %q after --instruction", f.Args())
	}
	if *instruction == "" {
		return usageError("--instruction is required")
	}
	if *mode != "once" {
		return usageError("--mode %q: this build runs only \"once\" (loop, reactive, schedule and workflow are not implemented)", *mode)
	}
	if err := c.validate(); err != nil {
		return err
	}
	if err := checkTracingEnv(); err != nil {
		return err
	}
	log := c.logger(stderr)
	stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	// Signals are caught before any child exists: a SIGTERM from now on
	// drains (below) instead of ending the supervisor by its default action.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	sup, err := c.newSupervisor(log, nil)
	if err != nil {
		return err
	}
	defer c.closeMCP()
	// Every required MCP server must be up before the root starts (exit 6).
	if err := c.waitMCP(ctx); err != nil {
		return err
	}
	run, err := sup.Start(ctx, supervisor.StartRequest{Payload: api.SpawnPayload{
		Contract:     api.OutputContract{Objective: *instruction, OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Scope:        c.rootScope(),
		Limits:       c.limits(),
		Telemetry:    api.Telemetry{RunID: *runID},
		Intelligence: c.intelligenceSpec(),
	}})
	if err != nil {
		return err
	}
	select {
	case <-run.TreeDone():
		// The root has ended, and so has every subagent of its tree: children
		// it left running were stopped, detached ones ran to their end.
	case sig := <-sigs:
		log.Info("draining", "signal", sig.String())
		ctx, cancel := context.WithTimeout(context.Background(), *c.drainTimeout)
		defer cancel()
		go func() {
			select {
			case sig := <-sigs:
				log.Warn("second signal: SIGKILL to every process group", "signal", sig.String())
				sup.KillAll()
			case <-ctx.Done():
			}
		}()
		if err := sup.Shutdown(ctx); err != nil {
			log.Error("unclean drain", "err", err)
			return exitWith(api.ExitUncleanDrain)
		}
		return nil // a clean drain exits 0
	}
	res := run.Result()
	out := res.Distillate.Text()
	if ref := res.Distillate.Reference; ref != nil {
		// No server outlives a one-shot run: print the whole stored result.
		if id, ok := api.ParseBlobURI(ref.URI); ok {
			if b, ok := sup.Blob(id); ok {
				out = string(b.Content)
			}
		}
	}
	fmt.Fprintln(stdout, out)
	if res.Status != api.StatusCompleted {
		fmt.Fprintf(stderr, "agentd: run ended %s", res.Status)
		if res.Detail != "" {
			fmt.Fprintf(stderr, ": %s", res.Detail)
		}
		fmt.Fprintln(stderr)
	}
	if code := api.ExitCode(res); code != 0 {
		return exitWith(code)
	}
	return nil
}
