package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/cmd/agentd/internal/cli/clitest"
)

// A bad cap exits 2 with a message naming its flag, before anything starts.
func TestCapFlagsAreValidated(t *testing.T) {
	for flag, value := range map[string]string{
		"--max-depth":           "0",
		"--max-children":        "257",
		"--max-total-subagents": "5000",
		"--max-inflight":        "-3",
		"--spawn-burst":         "0",
		"--spawn-rate":          "1e9",
		"--tree-token-ceiling":  "-1",
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), []string{"serve", flag, value}, &stderr, &stderr)
		var ee *cli.ExitError
		if !errors.As(err, &ee) || ee.Code != api.ExitUsage || !strings.Contains(err.Error(), flag) {
			t.Errorf("%s %s: %v", flag, value, err)
		}
	}
}

// A bad environment value is bad config naming the variable.
func TestEnvironmentIsValidated(t *testing.T) {
	for env, value := range map[string]string{
		"AGENT_MAX_TOKENS":     "lots",
		"AGENT_SPAWN_RATE":     "fast",
		"AGENT_ALLOW_TRIFECTA": "maybe",
		"AGENT_PING_INTERVAL":  "often",
		"AGENT_PEERS":          "b",
		"AGENT_ROUTES":         "nonsense",
		"AGENT_ALLOW_EXEC":     "perhaps",
		"AGENT_LOG_CONTENT":    "some",
		"AGENT_AGGREGATE_LOGS": "sometimes",
		"AGENT_STORE_WAIT":     "soon",
	} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, value)
			_, err := parseServe(nil, &bytes.Buffer{})
			var ee *cli.ExitError
			if !errors.As(err, &ee) || ee.Code != api.ExitUsage || !strings.Contains(err.Error(), env) {
				t.Errorf("%s=%s: %v", env, value, err)
			}
		})
	}
}

// A repeatable flag's command-line values replace its environment variable's
// (comma-separated); --peer and --route add to theirs (';'-separated).
func TestRepeatableFlags(t *testing.T) {
	t.Setenv("AGENT_ALLOW_PEER", "spiffe://td/a, spiffe://td/b")
	t.Setenv("AGENT_PEERS", "a=http://127.0.0.1:1/;b=http://127.0.0.1:2/")
	c, err := parseServe(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Identity.AllowPeer, " "); got != "spiffe://td/a spiffe://td/b" {
		t.Errorf("from the environment: --allow-peer %q", got)
	}
	c, err = parseServe([]string{"--allow-peer", "spiffe://td/c,spiffe://td/d", "--allow-peer", "spiffe://td/e", "--peer", "c=http://127.0.0.1:3/"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Identity.AllowPeer, " "); got != "spiffe://td/c spiffe://td/d spiffe://td/e" {
		t.Errorf("flags replace the environment: --allow-peer %q", got)
	}
	var names []string
	for _, p := range c.Mesh.Peers {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, " "); got != "a b c" {
		t.Errorf("--peer adds to AGENT_PEERS: %q", got)
	}
}

// --allow-exec, --log-content and --aggregate-logs: off, off and on by
// default; each set by its environment variable, which its flag beats. With
// --allow-exec the root grant holds subagent/exec.
func TestExecAndLogFlags(t *testing.T) {
	c, err := parseCore(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.AllowExec || c.LogContent || !c.AggregateLogs {
		t.Errorf("defaults: allow-exec %v, log-content %v, aggregate-logs %v", c.AllowExec, c.LogContent, c.AggregateLogs)
	}
	if scope := (&toolServers{exec: c.AllowExec}).rootScope(); scope.Holds(api.ExecRef) {
		t.Errorf("the root grant holds exec without --allow-exec: %v", scope.Allow)
	}
	t.Setenv("AGENT_ALLOW_EXEC", "true")
	t.Setenv("AGENT_LOG_CONTENT", "1")
	t.Setenv("AGENT_AGGREGATE_LOGS", "false")
	if c, err = parseCore(t); err != nil {
		t.Fatal(err)
	}
	if !c.AllowExec || !c.LogContent || c.AggregateLogs {
		t.Errorf("from the environment: allow-exec %v, log-content %v, aggregate-logs %v", c.AllowExec, c.LogContent, c.AggregateLogs)
	}
	if scope := (&toolServers{exec: c.AllowExec}).rootScope(); !scope.Holds(api.ExecRef) {
		t.Errorf("the root grant lacks exec with --allow-exec: %v", scope.Allow)
	}
	if c, err = parseCore(t, "--allow-exec=false", "--log-content=false", "--aggregate-logs"); err != nil {
		t.Fatal(err)
	}
	if c.AllowExec || c.LogContent || !c.AggregateLogs {
		t.Errorf("flags over the environment: allow-exec %v, log-content %v, aggregate-logs %v", c.AllowExec, c.LogContent, c.AggregateLogs)
	}
}

// A mistyped flag is a usage error of three lines, not the whole usage: the
// error, the flag it was likely meant to be, and where the flags are listed;
// the same for every command.
func TestMistypedFlagIsShort(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the suggestion; "" for none
	}{
		{[]string{"serve", "--listn", "127.0.0.1:1"}, "did you mean --listen?"},
		{[]string{"run", "--max-repeat", "3", "x"}, "did you mean --max-repeats?"},
		{[]string{"send", "--too", "http://127.0.0.1:1", "x"}, "did you mean --to?"},
		{[]string{"ctl", "a2a.Tree", "--jsn"}, "did you mean --json?"},
		{[]string{"store", "inspect", "--state-dri", "x"}, "did you mean --state-dir?"},
		{[]string{"certs", "init", "--forc"}, "did you mean --force?"},
		{[]string{"serve", "--max", "3"}, ""},
		{[]string{"serve", "--warm-pool", "many"}, `--warm-pool "many": want a whole number`},
		{[]string{"serve", "--deadline", "3"}, `--deadline "3": want a duration`},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), tc.args, &stderr, &stderr)
		if code := exitCode(err, &stderr); code != api.ExitUsage {
			t.Errorf("%v: exit %d, want %d", tc.args, code, api.ExitUsage)
		}
		out := stderr.String()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) > 3 {
			t.Errorf("%v: %d lines of error:\n%s", tc.args, len(lines), out)
		}
		if tc.want != "" && !strings.Contains(out, tc.want) {
			t.Errorf("%v: no %q in\n%s", tc.args, tc.want, out)
		}
		if tc.want == "" && strings.Contains(out, "did you mean") {
			t.Errorf("%v: a suggestion where no flag is close:\n%s", tc.args, out)
		}
		if cmd := strings.Join(tc.args[:len(tc.args)-1], " "); !strings.Contains(lines[len(lines)-1], "-h") || !strings.Contains(out, "agentd "+strings.Fields(cmd)[0]) {
			t.Errorf("%v: the last line does not point at -h:\n%s", tc.args, out)
		}
	}
}

// A key on the command line is refused without repeating it, naming the
// environment variable and the key file flag instead.
func TestKeyOnCommandLine(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--intelligence-key", "sk-secret-1234"},
		{"run", "--intelligence-key=sk-secret-1234", "x"},
		{"serve", "--api-key", "sk-secret-1234"},
	} {
		var stderr bytes.Buffer
		code := exitCode(run(context.Background(), args, &stderr, &stderr), &stderr)
		out := stderr.String()
		if code != api.ExitUsage || !strings.Contains(out, "AGENT_INTELLIGENCE_KEY ") || !strings.Contains(out, "--intelligence-key-file") {
			t.Errorf("%v: exit %d\n%s", args, code, out)
		}
		if strings.Contains(out, "sk-secret") {
			t.Errorf("%v: the key is repeated:\n%s", args, out)
		}
	}
}

// An unknown command, ctl method or store action is three lines at most:
// the error, the one meant when one is close, and where they are listed.
func TestUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serv"}, "did you mean serve?"},
		{[]string{"ctl", "a2a.Tre"}, "did you mean a2a.Tree?"},
		{[]string{"ctl", "tre"}, "did you mean a2a.Tree?"},
		{[]string{"store", "inpsect"}, "agentd store -h"},
	} {
		var stderr bytes.Buffer
		code := exitCode(run(context.Background(), tc.args, &stderr, &stderr), &stderr)
		if out := stderr.String(); code != api.ExitUsage || !strings.Contains(out, tc.want) || strings.Count(out, "\n") > 3 {
			t.Errorf("%v: exit %d\n%s", tc.args, code, out)
		}
	}
}

// parsers are the commands' parse-and-validate steps, for the tests that
// go over every flag.
var parsers = map[string]func(args []string) (any, error){
	"serve": func(args []string) (any, error) { return cli.Validated(parseServe(args, io.Discard)) },
	"run": func(args []string) (any, error) {
		return cli.Validated(parseRun(append(args, "--instruction", "x"), io.Discard))
	},
	"store": func(args []string) (any, error) {
		return cli.Validated(parseStoreCmd(append([]string{"inspect"}, args...), io.Discard))
	},
}

// A flag beats its environment variable, for every flag that has one: a
// malformed value of the variable changes nothing when the flag is given
// (the same config, or the same error, as without the variable).
func TestEveryFlagBeatsItsEnvironment(t *testing.T) {
	if n := clitest.FlagsBeatTheirEnvironment(t, parsers); n < 50 {
		t.Errorf("only %d flags with an environment variable", n)
	}
}
