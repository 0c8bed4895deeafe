package supervisor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/internal/testkit"
)

// Every refusal text of the chokepoint maps to its own bounded reason.
func TestRefusalReasons(t *testing.T) {
	cases := map[string]string{
		refuseDraining:                   ReasonDraining,
		refuseDepth(4):                   ReasonMaxDepth,
		refuseChildCap:                   ReasonMaxChildren,
		refuseInflight(4):                ReasonMaxInflight,
		refuseTreeCap:                    ReasonMaxTotal,
		refuseRate:                       ReasonSpawnRate,
		refuseCeiling:                    ReasonTokenCeiling,
		api.ErrMissingObjective.Error():  ReasonMissingObjective,
		refuseScopeWidens + "github/pr":  ReasonScopeWidens,
		refuseTrifecta:                   ReasonRuleOfTwo,
		refuseGrantExhausted:             ReasonGrantExhausted,
		refuseDeadlinePassed:             ReasonDeadlinePassed,
		refuseUnknownProvider + `"peer"`: ReasonUnknownProvider,
		refuseCapacity:                   ReasonServiceCapacity,
		refuseBadArguments + "eof":       ReasonBadArguments,
		"spawn denied: output_format: a schema is only allowed with kind \"json\"": ReasonInvalid,
		"spawn denied: scope: a tool is {server, tool}, both non-empty":            ReasonInvalid,
	}
	known := map[string]bool{}
	for _, r := range RefusalReasons {
		known[r] = true
	}
	for text, want := range cases {
		got := refusalReason(text)
		if got != want {
			t.Errorf("refusalReason(%q) = %q, want %q", text, got, want)
		}
		if !known[got] {
			t.Errorf("reason %q is not in RefusalReasons", got)
		}
	}
	st := (&Supervisor{}).Stats()
	if len(st.Refusals) != len(RefusalReasons) {
		t.Errorf("Stats reports %d reasons, want every one of %d", len(st.Refusals), len(RefusalReasons))
	}
}

// A root's spawn span is a child of the span its Start came with; each nested
// child's spawn span is a child of the supervisor's span of the tool call that
// asked for it, which is a child of the caller's spawn span. Each child's
// payload names its own spawn span as its parent. Spawns and refusals are
// counted by provider and reason.
func TestSpawnSpansAndCounts(t *testing.T) {
	rec := testkit.RecordSpans(t)
	s, _ := newNestingSupervisor(t, func(c *Config) { c.Caps.MaxChildren = 2 })
	leaf := prog{}
	p := prog{Calls: []progCall{
		spawnCall(leaf, api.DispositionSync),
		spawnCall(leaf, api.DispositionSync),
		spawnCall(leaf, api.DispositionSync),                                                       // over max_children
		spawnCall(leaf, api.DispositionSync, func(a *api.SpawnArgs) { a.Contract.Objective = "" }), // refused first by the cap, too
		rawCall(api.ToolSpawn, "not an object"),                                                    // bad arguments
	}}
	ctx, req := telemetry.Tracer().Start(context.Background(), "request")
	pl := testPayload(p.objective(), time.Minute)
	pl.Limits.MaxSteps, pl.Limits.MaxTokens = 50, 100000
	r, err := s.Start(ctx, StartRequest{Payload: pl})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.TreeDone():
	case <-time.After(30 * time.Second):
		t.Fatal("tree did not end")
	}
	req.End()
	rep := report(t, r.Result())
	for i, want := range []bool{false, false, true, true, true} {
		if rep.Results[i].IsError != want {
			t.Fatalf("call %d: %+v", i, rep.Results[i])
		}
	}

	st := s.Stats()
	if st.Spawns[localProvider] != 3 {
		t.Errorf("spawns %v, want 3 local (the root and two children)", st.Spawns)
	}
	if st.Refusals[ReasonMaxChildren] != 2 || st.Refusals[ReasonBadArguments] != 1 || st.Refusals[ReasonMaxDepth] != 0 {
		t.Errorf("refusals %v, want 2 max_children and 1 bad_arguments", st.Refusals)
	}

	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var spawns, calls, refused []sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		byID[sp.SpanContext().SpanID()] = sp
		switch {
		case sp.Name() == "agentd.spawn":
			spawns = append(spawns, sp)
		case sp.Name() == "tool/call "+api.ToolSpawn:
			calls = append(calls, sp)
			if sp.Status().Code == codes.Error {
				refused = append(refused, sp)
			}
		}
	}
	if len(spawns) != 3 || len(calls) != 5 || len(refused) != 3 {
		t.Fatalf("%d spawn spans, %d tool spans (%d refused); want 3, 5, 3", len(spawns), len(calls), len(refused))
	}
	var root sdktrace.ReadOnlySpan
	for _, sp := range spawns {
		if sp.SpanContext().TraceID() != req.SpanContext().TraceID() {
			t.Fatalf("span %s in trace %s, want %s", sp.Name(), sp.SpanContext().TraceID(), req.SpanContext().TraceID())
		}
		if sp.Parent().SpanID() == req.SpanContext().SpanID() {
			root = sp
		}
	}
	if root == nil {
		t.Fatal("no spawn span under the request span")
	}
	for _, c := range calls {
		if c.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("tool call span's parent %s, want the root's spawn span %s", c.Parent().SpanID(), root.SpanContext().SpanID())
		}
	}
	for _, sp := range spawns {
		if sp == root {
			continue
		}
		if parent, ok := byID[sp.Parent().SpanID()]; !ok || parent.Name() != "tool/call "+api.ToolSpawn {
			t.Errorf("nested spawn span's parent is %v, want a tool call span", sp.Parent().SpanID())
		}
	}
	// The root's payload, and each child's, names its own spawn span.
	if got := r.n.payload.Telemetry.ParentSpanID; got != root.SpanContext().SpanID().String() {
		t.Errorf("root payload parent_span_id %s, want its spawn span %s", got, root.SpanContext().SpanID())
	}
	for i := 0; i < 2; i++ {
		var child progReport
		cr := childReportOf(t, rep.Results[i])
		if err := json.Unmarshal([]byte(cr.Distillate.Text()), &child); err != nil {
			t.Fatal(err)
		}
		sp, ok := byID[mustSpanID(t, child.Telemetry.ParentSpanID)]
		if !ok || sp.Name() != "agentd.spawn" || child.Telemetry.TraceID != req.SpanContext().TraceID().String() || child.Telemetry.Traceparent == "" {
			t.Errorf("child %s telemetry %+v does not name its spawn span", child.AgentPath, child.Telemetry)
		}
	}
}

func mustSpanID(t *testing.T, s string) trace.SpanID {
	t.Helper()
	id, err := trace.SpanIDFromHex(s)
	if err != nil {
		t.Fatalf("span id %q: %v", s, err)
	}
	return id
}

// The supervisor's span of a tool call is a child of the traceparent the call
// carries, else of the caller's spawn span.
func TestToolSpanParent(t *testing.T) {
	testkit.RecordSpans(t)
	_, spawn := telemetry.Tracer().Start(context.Background(), "spawn")
	defer spawn.End()
	n := newNode("h", nil, testPayload("x", time.Minute))
	n.span = spawn
	_, sp := startToolSpan(n, api.ToolCall{Tool: "t/x"})
	if got := sp.(sdktrace.ReadOnlySpan).Parent().SpanID(); got != spawn.SpanContext().SpanID() {
		t.Errorf("parent %s, want the spawn span", got)
	}
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, sp = startToolSpan(n, api.ToolCall{Tool: "t/x", Traceparent: tp})
	if got := sp.(sdktrace.ReadOnlySpan).Parent().SpanID().String(); got != "00f067aa0ba902b7" {
		t.Errorf("parent %s, want the call's", got)
	}
	_, sp = startToolSpan(n, api.ToolCall{Tool: "t/x", Traceparent: "junk"})
	if got := sp.(sdktrace.ReadOnlySpan).Parent().SpanID(); got != spawn.SpanContext().SpanID() {
		t.Errorf("bad traceparent: parent %s, want the spawn span", got)
	}
}

// The heartbeat stops, and Healthy turns false, when the supervisor's own
// locks wedge; it recovers when they free.
func TestHeartbeatWedged(t *testing.T) {
	s, _ := newSupervisor(t, "responsive")
	if !s.Healthy() || !s.LastHeartbeat().IsZero() {
		t.Fatal("before Heartbeat runs: want healthy with no beat")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Heartbeat(ctx, 5*time.Millisecond)
	testkit.WaitFor(t, 10*time.Second, "a heartbeat", func() bool { return !s.LastHeartbeat().IsZero() })
	for _, lock := range []interface {
		Lock()
		Unlock()
	}{&s.mu, &theReaper.mu} {
		if !s.Healthy() {
			t.Fatal("unhealthy while beating")
		}
		lock.Lock()
		testkit.WaitFor(t, 10*time.Second, "unhealthy while the lock is held", func() bool { return !s.Healthy() })
		lock.Unlock()
		testkit.WaitFor(t, 10*time.Second, "healthy once the lock is free", s.Healthy)
	}
}

// A child stopped with SIGSTOP is found stuck by Detector C and killed; the
// supervisor's heartbeat goes on beating meanwhile (its locks are never held
// on the stopped child's account). Beats are counted rather than Healthy
// polled: its staleness bound is wall-clock, and this machine is loaded.
func TestHeartbeatIgnoresStoppedChild(t *testing.T) {
	s, _ := newSupervisor(t, "responsive", func(c *Config) {
		c.PingInterval = 20 * time.Millisecond
		c.PingMiss = 5
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Heartbeat(ctx, 5*time.Millisecond)
	r := start(t, s, testPayload("then freeze", time.Minute))
	pid := waitPID(t, r)
	testkit.WaitFor(t, 10*time.Second, "two pongs", func() bool { return s.Stats().Pongs >= 2 })
	if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the child stopped", func() bool { return testkit.Stopped(pid) || isDone(r) })
	beats := 0
	last := s.LastHeartbeat()
	testkit.WaitFor(t, 10*time.Second, "the stopped child's run ended", func() bool {
		if b := s.LastHeartbeat(); b.After(last) {
			beats, last = beats+1, b
		}
		return isDone(r)
	})
	if res := r.Result(); res.Cause != api.CausePongTimeout {
		t.Fatalf("result %+v, want pong_timeout", res)
	}
	if beats == 0 {
		t.Fatal("no heartbeat while the child was stopped")
	}
	testkit.WaitFor(t, 10*time.Second, "healthy after the kill", s.Healthy)
}
