// Command agentd is an A2A mesh service that runs each piece of work as a tree
// of supervised subagents. Run `agentd --help` for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentd/agentd/agent"
	"github.com/agentd/agentd/api"
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

// exitError carries a specific exit code out of run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError is bad usage or bad config: exit 2, with a message naming the
// setting.
func usageError(format string, args ...any) error {
	return &exitError{code: api.ExitUsage, err: fmt.Errorf(format, args...)}
}

// badConfig is a Validate error: exit 2; the message names the setting.
func badConfig(err error) error { return &exitError{code: api.ExitUsage, err: err} }

// exitWith ends the process with code, printing nothing more.
func exitWith(code int) error { return &exitError{code: code} }

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "agentd:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "agentd:", err)
	return api.ExitFailure
}

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"serve": {"run the A2A mesh service (supervisor + HTTPS server)", runServe},
	"run":   {"one-shot: run one root subagent and exit with its status (= --mode once)", runOnce},
	"send":  {"send a message to an A2A agent and print the task's state and artifact", runSend},
	"ctl":   {"call an a2a.* operator method (drain, lame duck, pause, cancel, tree, caps)", runCtl},
	"certs": {"mint a development CA and SPIFFE SVIDs for local mTLS", runCerts},
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		printUsage(stderr)
		return exitWith(api.ExitUsage)
	}
	if isHelp(args[0]) {
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
		printUsage(stderr)
		return usageError("unknown command %q", name)
	}
	return cmd.run(ctx, rest, stdout, stderr)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `agentd: an A2A mesh service that runs each piece of work as a tree of supervised subagents.

Usage:
  agentd serve [flags]                 run the service (default --listen 127.0.0.1:8080)
  agentd run --instruction TEXT [flags] one-shot run; exit code from the root's status
  agentd send --to URL [--stream] TEXT  send a message to an A2A agent
  agentd ctl METHOD --to URL [flags]    call an a2a.* operator method (a2a.Tree, a2a.Drain, ...)
  agentd certs init --trust-domain TD --dir DIR   mint a dev CA and SVIDs for local mTLS

Run "agentd COMMAND -h" for a command's flags.

Exit codes:
`)
	fmt.Fprint(w, api.ExitCodeTable())
}
