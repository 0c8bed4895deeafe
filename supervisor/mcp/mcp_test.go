package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

func fastOptions() Options {
	return Options{
		ConnectTimeout: 5 * time.Second,
		CallWait:       10 * time.Second,
		ReconnectMin:   20 * time.Millisecond,
		ReconnectMax:   200 * time.Millisecond,
		PingInterval:   100 * time.Millisecond,
	}
}

func find(t *testing.T, obs []observed, tool string) observed {
	t.Helper()
	for _, o := range obs {
		if o.Tool == tool {
			return o
		}
	}
	t.Fatalf("no script observed a result of %s; saw %+v", tool, obs)
	return observed{}
}

// A scripted model calls every kind of tool through a real supervisor and a
// real child process: results come back, a failing tool and a protocol error
// arrive as tool errors, a big result is truncated with a note, non-text
// content is described, a made-up tool name is refused by the scope check, and
// every call carries run_id, traceparent and the agent path in _meta.
func TestToolCallsEndToEnd(t *testing.T) {
	ts := newTestServer(t, "")
	opts := fastOptions()
	opts.MaxResult = 1000
	h := newHarness(t, Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, opts)
	h.waitRequired(10 * time.Second)

	grant, missing := h.set.Grant(nil)
	if len(missing) != 0 || len(grant) != len(testTools)+1 || grant[len(grant)-1] != (api.ToolRef{Server: "t", Tool: api.ResourcesTool}) {
		t.Fatalf("grant = %v (missing %v), want every one of %v (listed over 4 pages) and the reads of its resources", grant, missing, testTools)
	}
	// A tool in the grant that the server does not have: the server's
	// protocol error reaches the model as a tool error.
	grant = append(grant, api.ToolRef{Server: "t", Tool: "gone"})
	run := h.start("run-e2e", `[default]
call t/echo {"message":"hi"}
call t/fail
call t/big {"n":5000}
call t/image
call t/gone
call t/noargs
call t/whoami
call t/made_up_by_the_model
call elsewhere/x
answer "done"
`, grant)
	res := h.wait(run)
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "done" {
		t.Fatalf("result = %+v", res)
	}
	obs := h.observed()
	check := func(tool string, isErr bool, want ...string) {
		t.Helper()
		o := find(t, obs, tool)
		if o.IsError != isErr {
			t.Errorf("%s: is_error = %v, want %v (text %q)", tool, o.IsError, isErr, o.Text)
		}
		for _, w := range want {
			if !strings.Contains(o.Text, w) {
				t.Errorf("%s: %q does not contain %q", tool, o.Text, w)
			}
		}
	}
	check("t/echo", false, "echo: hi")
	check("t/fail", true, "it failed on purpose")
	check("t/big", false, "[agentd: result truncated: 1000 of 5000 bytes shown; the cap is 1000 bytes]")
	check("t/image", false, "a picture:", "[image image/png, 8 bytes: not shown]")
	check("t/gone", true, "t/gone: the server refused the call")
	check("t/noargs", false, "args {}")
	check("t/whoami", false, "run run-e2e")
	check("t/made_up_by_the_model", true, `tool "t/made_up_by_the_model" is not in this subagent's scope`)
	check("elsewhere/x", true, `tool "elsewhere/x" is not in this subagent's scope`)
	big := find(t, obs, "t/big").Text
	if i := strings.Index(big, "\n[agentd:"); i < 0 || i > 1000 {
		t.Errorf("truncated text is %d bytes before the note, cap 1000", i)
	}

	calls := ts.recorded()
	var names []string
	for _, c := range calls {
		names = append(names, c.Tool)
		if c.Meta[MetaRunID] != "run-e2e" || c.Meta[MetaTraceparent] != testTraceparent || c.Meta[api.MetaAgentPath] != "0" {
			t.Errorf("%s: _meta = %v, want run_id, traceparent and agent path", c.Tool, c.Meta)
		}
	}
	// Refused and malformed calls never reach the server.
	if got := strings.Join(names, ","); got != "echo,fail,big,image,noargs,whoami" {
		t.Errorf("the server received %s", got)
	}
}

// The tool specs offered to a child carry the server's description (or title)
// and input schema.
func TestDescribeFromToolList(t *testing.T) {
	ts := newTestServer(t, "")
	set, err := NewSet(Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	set.Start()
	defer set.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := set.WaitRequired(ctx); err != nil {
		t.Fatal(err)
	}
	srv, _ := set.Server("t")
	got := srv.Tools()
	sort.Strings(got)
	want := append([]string(nil), testTools...)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tools = %v", got)
	}
	spec, ok := srv.Describe("echo")
	if !ok || spec.Name != "t/echo" || spec.Description != "Echoes a message back." {
		t.Fatalf("echo spec = %+v", spec)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(spec.InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties["message"] == nil {
		t.Fatalf("echo schema = %s (%v)", spec.InputSchema, err)
	}
	if spec, _ := srv.Describe("noargs"); spec.Description != "No arguments" {
		t.Fatalf("a tool without a description is described by its title: %+v", spec)
	}
	if _, ok := srv.Describe("gone"); ok {
		t.Fatal("described a tool the server does not list")
	}
	grant, missing := set.Grant(map[string][]string{"t": {"echo", "echo", "nope"}})
	if len(grant) != 1 || grant[0].Tool != "echo" || len(missing) != 1 || missing[0].Tool != "nope" {
		t.Fatalf("narrowed grant = %v, missing %v", grant, missing)
	}
}

// A child spawned with a narrowed scope can call what it was granted and is
// refused everything else, by the supervisor, before any request reaches the
// server; a spawn asking for a tool its parent lacks is refused.
func TestNarrowedChildIsRefusedTheOthers(t *testing.T) {
	ts := newTestServer(t, "")
	h := newHarness(t, Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, fastOptions())
	h.waitRequired(10 * time.Second)
	run := h.start("run-narrow", `[depth 0]
spawn sync "narrow" scope=t/echo
spawn sync "wider" scope=t/echo,t/big
answer "{results}"

[depth 1]
call t/echo {"message":"from the child"}
call t/fail
call t/whoami
answer "child done"
`, refs("t", "echo", "fail", "whoami"))
	res := h.wait(run)
	if res.Status != api.StatusCompleted || !strings.Contains(res.Distillate.Text(), "child done") {
		t.Fatalf("result = %+v", res)
	}
	var spawns []observed
	for _, o := range h.observed() {
		switch {
		case o.Path == "0.1" && o.Tool == "t/echo":
			if o.IsError || o.Text != "echo: from the child" {
				t.Errorf("granted call: %+v", o)
			}
		case o.Path == "0.1":
			if !o.IsError || !strings.Contains(o.Text, "is not in this subagent's scope") {
				t.Errorf("ungranted call not refused: %+v", o)
			}
		case o.Path == "0" && o.Tool == api.ToolSpawn:
			spawns = append(spawns, o)
		}
	}
	if len(spawns) != 2 || spawns[0].IsError || !spawns[1].IsError || spawns[1].Text != "spawn denied: scope widens: t/big" {
		t.Errorf("spawn results = %+v, want the narrow one admitted and the widening one refused", spawns)
	}
	if len(h.logs.Records("subagent spawned")) != 1 {
		t.Errorf("want exactly one child spawned (the widening spawn refused)")
	}
	calls := ts.recorded()
	if len(calls) != 1 || calls[0].Tool != "echo" || calls[0].Meta[api.MetaAgentPath] != "0.1" || calls[0].Meta[MetaRunID] != "run-narrow" {
		t.Fatalf("server calls = %+v, want only the child's echo", calls)
	}
}

// A slow call does not hold up other calls, and when its subagent is
// cancelled the MCP request is cancelled too (the server's handler sees its
// context end).
func TestSlowCallCancelledWithItsSubagent(t *testing.T) {
	ts := newTestServer(t, "")
	h := newHarness(t, Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, fastOptions())
	h.waitRequired(10 * time.Second)
	slow := h.start("run-slow", "[default]\ncall t/slow\nanswer \"unreachable\"\n", refs("t", "slow"))
	testkit.WaitFor(t, 20*time.Second, "slow call started", func() bool { in, _ := ts.slowCounts(); return in == 1 })

	fast := h.start("run-fast", "[default]\ncall t/echo {\"message\":\"meanwhile\"}\nanswer \"{transcript}\"\n", refs("t", "echo"))
	if res := h.wait(fast); res.Status != api.StatusCompleted || !strings.Contains(res.Distillate.Text(), "echo: meanwhile") {
		t.Fatalf("fast run during a slow call: %+v", res)
	}
	if _, ended := ts.slowCounts(); ended != 0 {
		t.Fatal("the slow call ended before its subagent was cancelled")
	}
	h.sup.Cancel(slow.Handle(), "test")
	res := h.wait(slow)
	if res.Status != api.StatusCancelled {
		t.Fatalf("slow run = %+v, want cancelled", res)
	}
	testkit.WaitFor(t, 20*time.Second, "the server saw the slow call cancelled", func() bool { _, ended := ts.slowCounts(); return ended == 1 })
}

// The server restarts (a new process on the same address, knowing none of the
// old sessions): the session is lost, re-established with backoff, and a
// call made meanwhile waits for it and succeeds. Both with a stateless server
// (the newest protocol) and a session-based one; and with pings off, so the
// first call after the restart is the one that finds the session gone.
func TestReconnectAfterServerRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
		protocol  string // negotiated
		ping      time.Duration
	}{
		{"stateless", true, "2026-07-28", 100 * time.Millisecond},
		{"sessions", false, "2025-11-25", 100 * time.Millisecond},
		{"sessions without pings", false, "2025-11-25", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServerMode(t, "", tc.stateless)
			opts := fastOptions()
			opts.PingInterval, opts.CallWait = tc.ping, 30*time.Second
			h := newHarness(t, Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, opts)
			h.waitRequired(10 * time.Second)
			srv, _ := h.set.Server("t")
			connected := func() int { return len(h.logs.Records("mcp server connected")) }
			if res := h.wait(h.start("run-before", "[default]\ncall t/echo {\"message\":\"before\"}\nanswer \"{transcript}\"\n", refs("t", "echo"))); !strings.Contains(res.Distillate.Text(), "echo: before") {
				t.Fatalf("before the restart: %+v", res)
			}
			if p := h.logs.Records("mcp server connected")[0]["protocol"]; p != tc.protocol {
				t.Fatalf("negotiated %v, want %s", p, tc.protocol)
			}

			ts.stop()
			if tc.ping > 0 {
				testkit.WaitFor(t, 20*time.Second, "session loss noticed", func() bool { return !srv.Connected() })
				run := h.start("run-during", "[default]\ncall t/echo {\"message\":\"during\"}\nanswer \"{transcript}\"\n", refs("t", "echo"))
				testkit.WaitFor(t, 20*time.Second, "the call waits for the session", func() bool {
					return len(h.logs.Records("mcp call waiting for the session")) > 0
				})
				ts.start()
				if res := h.wait(run); res.Status != api.StatusCompleted || !strings.Contains(res.Distillate.Text(), "echo: during") {
					t.Fatalf("call made during the outage: %+v", res)
				}
			} else {
				ts.start()
				if res := h.wait(h.start("run-after", "[default]\ncall t/echo {\"message\":\"after\"}\nanswer \"{transcript}\"\n", refs("t", "echo"))); !strings.Contains(res.Distillate.Text(), "echo: after") {
					t.Fatalf("call after the restart: %+v", res)
				}
			}
			if connected() < 2 {
				t.Fatalf("connected %d times, want a reconnect", connected())
			}
		})
	}
}

// A server that is down: WaitRequired names it, and a call fails as a tool
// error the model sees once CallWait passes; the subagent goes on. An optional
// server down does not count.
func TestServerDownIsAToolError(t *testing.T) {
	ts := newTestServer(t, "")
	url := ts.url()
	ts.stop()
	opts := fastOptions()
	opts.CallWait = 300 * time.Millisecond
	h := newHarness(t, Config{Servers: []ServerConfig{{Name: "t", URL: url}, {Name: "maybe", URL: url, Optional: true}}}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := h.set.WaitRequired(ctx)
	var ue *UnavailableError
	if !errors.As(err, &ue) || len(ue.Down) != 1 || ue.Down["t"] == nil || !strings.Contains(err.Error(), "t: ") {
		t.Fatalf("WaitRequired = %v, want t (and not the optional server) unavailable", err)
	}
	if h.set.Ready() {
		t.Fatal("ready with a required server never connected")
	}
	res := h.wait(h.start("run-down", "[default]\ncall t/echo {\"message\":\"x\"}\nanswer \"went on\"\n", refs("t", "echo")))
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "went on" {
		t.Fatalf("result = %+v", res)
	}
	o := find(t, h.observed(), "t/echo")
	if !o.IsError || !strings.Contains(o.Text, `MCP server "t" is unavailable`) {
		t.Fatalf("call to a down server: %+v", o)
	}
	ts.start()
	testkit.WaitFor(t, 20*time.Second, "ready once the server is up", h.set.Ready)
}

// A bearer token from the configuration is sent on every request; a wrong one
// keeps the server unavailable.
func TestBearerToken(t *testing.T) {
	ts := newTestServer(t, "s3cret")
	good, err := NewSet(Config{Servers: []ServerConfig{{Name: "t", URL: ts.url(), Token: "s3cret"}}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	good.Start()
	defer good.Close()
	bad, err := NewSet(Config{Servers: []ServerConfig{{Name: "t", URL: ts.url(), Token: "wrong"}}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	bad.Start()
	defer bad.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := good.WaitRequired(ctx); err != nil {
		t.Fatal(err)
	}
	srv, _ := good.Server("t")
	out := srv.Call(ctx, supervisorNode("run-token"), "echo", json.RawMessage(`{"message":"authorized"}`))
	if out.IsError || out.Text() != "echo: authorized" {
		t.Fatalf("call = %+v", out)
	}
	// Once the first connect attempt has failed, WaitRequired reports its
	// error (a fixed short wait could end before the attempt does).
	badSrv, _ := bad.Server("t")
	testkit.WaitFor(t, 20*time.Second, "the first connect attempt with the wrong token", func() bool {
		badSrv.mu.Lock()
		defer badSrv.mu.Unlock()
		return badSrv.tried
	})
	short, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	err = bad.WaitRequired(short)
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong token: %v (want unauthorized, without the token in the message)", err)
	}
}

// Arguments that are not a JSON object are refused before any request.
func TestArgumentsMustBeAnObject(t *testing.T) {
	ts := newTestServer(t, "")
	set, err := NewSet(Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	set.Start()
	defer set.Close()
	srv, _ := set.Server("t")
	ctx := context.Background()
	for _, args := range []string{`[1,2]`, `"x"`, `{"a":`, `5`} {
		out := srv.Call(ctx, supervisorNode("r"), "echo", json.RawMessage(args))
		if !out.IsError || !strings.Contains(out.Text(), "t/echo: the arguments must be a JSON object") {
			t.Errorf("%s: %+v", args, out)
		}
	}
	if n := len(ts.recorded()); n != 0 {
		t.Fatalf("the server received %d calls", n)
	}
}
