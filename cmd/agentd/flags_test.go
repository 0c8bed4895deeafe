package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
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
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != api.ExitUsage || !strings.Contains(err.Error(), flag) {
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
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != api.ExitUsage || !strings.Contains(err.Error(), env) {
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
