package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/client"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/agent"
	_ "github.com/agentd/agentd/internal/noprofile" // no heap profile sampling, from init on
)

func main() {
	// Subagent mode comes first, before any flag parsing or other init: the
	// supervisor sets AGENT_SUBAGENT when it re-execs this binary. argv is never
	// trusted for this, and the payload arrives on stdin.
	if os.Getenv(api.EnvSubagent) != "" {
		os.Exit(agent.Main())
	}
	// A write to a child or a client that just went away must be an error, not
	// the death of the supervisor.
	signal.Ignore(syscall.SIGPIPE)
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

// command is one subcommand: its line in `agentd --help` and its run.
type command struct {
	usage string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands are the subcommands, by name.
var commands = map[string]command{
	"serve": {"serve [flags]                 run the service (default --listen 127.0.0.1:8080)", runServe},
	"run":   {"run --instruction TEXT [flags] a root in a mode (once, loop, schedule, reactive, workflow); exit code from its status", runOnce},
	"send":  {"send --to URL [--stream] TEXT  send a message to an A2A agent", client.Send},
	"ctl":   {"ctl METHOD --to URL [flags]    call an a2a.* operator method (a2a.Tree, a2a.Drain, ...)", client.Ctl},
	"certs": {"certs init --trust-domain TD --dir DIR   mint a dev CA and SVIDs for local mTLS", runCerts},
	"store": {"store inspect|prune [flags]    what the task store holds; delete finished tasks", runStoreCmd},
}

// commandOrder is the order of `agentd --help`.
var commandOrder = []string{"serve", "run", "send", "ctl", "store", "certs"}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		printUsage(stderr)
		return cli.ExitWith(api.ExitUsage)
	}
	if cli.IsHelp(args[0]) {
		printUsage(stdout)
		return nil
	}
	name, rest := args[0], args[1:]
	if len(name) > 0 && name[0] == '-' {
		// `agentd --instruction ...` is the one-shot form: flags first
		// means `agentd run`.
		name, rest = "run", args
	}
	cmd, ok := commands[name]
	if !ok {
		msg := fmt.Sprintf("unknown command %q", name)
		if near := cli.ClosestWord(name, commandOrder, func(s string) string { return s }); near != "" {
			msg += fmt.Sprintf("\ndid you mean %s?", near)
		}
		return cli.UsageError("%s\nrun 'agentd --help' for the commands", msg)
	}
	return cmd.run(ctx, rest, stdout, stderr)
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, "agentd: an A2A mesh service that runs each piece of work as a tree of supervised subagents.\n\nUsage:\n")
	for _, name := range commandOrder {
		fmt.Fprintf(w, "  agentd %s\n", commands[name].usage)
	}
	fmt.Fprint(w, "\nRun \"agentd COMMAND -h\" for a command's flags.\n\nExit codes:\n")
	fmt.Fprint(w, api.ExitCodeTable())
}
