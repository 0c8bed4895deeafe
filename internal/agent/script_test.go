package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// fakeSupervisor answers the self-tools as the supervisor would, in process:
// spawn number n gets handle hN; refusals by spawn number.
type fakeSupervisor struct {
	calls   []api.ToolCall
	refuse  map[int]string
	spawned map[string]string // handle -> objective
	n       int
}

func (f *fakeSupervisor) CallTool(ctx context.Context, name string, args json.RawMessage) (api.ToolResult, error) {
	f.calls = append(f.calls, api.ToolCall{Tool: name, Args: args})
	finished := func(h string) api.ToolResult {
		r := api.ChildReport{Handle: h, ResourceURI: api.ResourceURI(h), AgentPath: "0." + h[1:]}
		r.ReportResult(api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("done: " + f.spawned[h])})
		return r.ToolResult()
	}
	switch name {
	case api.ToolSpawn:
		var a api.SpawnArgs
		if err := json.Unmarshal(args, &a); err != nil {
			return api.TextResult("bad args", true), nil
		}
		f.n++
		if r, ok := f.refuse[f.n]; ok {
			return api.TextResult(r, true), nil
		}
		h := fmt.Sprintf("h%d", f.n)
		if f.spawned == nil {
			f.spawned = map[string]string{}
		}
		f.spawned[h] = a.Contract.Objective
		if d, _ := a.Disposition.Normalize(); d == api.DispositionSync {
			return finished(h), nil
		}
		return api.ChildReport{Handle: h, ResourceURI: api.ResourceURI(h), State: api.ChildRunning}.ToolResult(), nil
	case api.ToolAwait:
		var a api.AwaitArgs
		_ = json.Unmarshal(args, &a)
		return finished(a.Handle), nil
	}
	return api.TextResult("ran "+name, false), nil
}

type usageLog struct{ deltas []api.Usage }

func (u *usageLog) Event(step int, kind string, d api.Usage) { u.deltas = append(u.deltas, d) }

func writeScript(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.txt")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runScript runs the loop with a script model for the agent at path/depth.
func runScript(t *testing.T, ctx context.Context, src, path string, depth int, sup *fakeSupervisor) (api.SubagentResult, *usageLog) {
	t.Helper()
	m, err := intelligence.New(api.Intelligence{Endpoint: "builtin:script=" + writeScript(t, src)}, "")
	if err != nil {
		t.Fatal(err)
	}
	p := payload()
	p.AgentID, p.AgentPath, p.Depth = path, path, depth
	p.Limits.MaxSteps = 10
	p.Limits.MaxTokens = 100000
	p.Contract.Objective = "the objective"
	ev := &usageLog{}
	l := &Loop{Payload: p, Model: m, Tools: offeredTools(p), Caller: sup, Report: ev}
	return l.Run(ctx), ev
}

func TestScriptDrivesTheSelfTools(t *testing.T) {
	src := `[default]
answer "leaf"

[depth 0]
usage 7 3
call demo/echo {"x": 1}
spawn sync "first" max_tokens=50
spawn async "second" deadline=2s scope=demo/echo
spawn async "third"
await
answer "{path}@{depth} {objective}\n{results}\nhandles: {handles}\n{transcript}"
`
	sup := &fakeSupervisor{refuse: map[int]string{3: "spawn denied: spawn rate exceeded"}}
	res, ev := runScript(t, context.Background(), src, "0", 0, sup)
	if res.Status != api.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	var tools []string
	for _, c := range sup.calls {
		tools = append(tools, c.Tool)
	}
	if got := strings.Join(tools, ","); got != "demo/echo,subagent.spawn,subagent.spawn,subagent.spawn,subagent.await" {
		t.Fatalf("calls = %s", got)
	}
	var first, second api.SpawnArgs
	json.Unmarshal(sup.calls[1].Args, &first)
	json.Unmarshal(sup.calls[2].Args, &second)
	if first.Disposition != api.DispositionSync || first.Limits.MaxTokens != 50 || second.Disposition != api.DispositionAsync ||
		second.Limits.Deadline.D() != 2*time.Second || len(second.Scope.Allow) != 1 || string(sup.calls[0].Args) != `{"x": 1}` {
		t.Fatalf("spawn args %+v / %+v", first, second)
	}
	if !strings.Contains(string(sup.calls[4].Args), `"h2"`) {
		t.Fatalf("await args %s, want the async handle h2 only", sup.calls[4].Args)
	}
	want := []string{
		"0@0 the objective\ndone: first\ndone: second\nhandles: h1 h2\n",
		"demo/echo: ran demo/echo",
		"subagent.spawn: spawn denied: spawn rate exceeded",
	}
	for _, w := range want {
		if !strings.Contains(res.Distillate.Text(), w) {
			t.Errorf("answer lacks %q:\n%s", w, res.Distillate.Text())
		}
	}
	if ev.deltas[0] != (api.Usage{TokensIn: 7, TokensOut: 3, Steps: 1}) || ev.deltas[1].TokensIn == 7 {
		t.Fatalf("usage deltas %+v", ev.deltas)
	}
}

func TestScriptSections(t *testing.T) {
	src := `[default]
answer "default {path}"
[depth 1]
answer "depth one {path}"
[path 0.3]
refuse "not me"
[path 0.2.1]
call a/b
repeat
`
	for _, tc := range []struct {
		path   string
		depth  int
		status api.TerminalStatus
		text   string
	}{
		{"0", 0, api.StatusCompleted, "default 0"},
		{"0.1", 1, api.StatusCompleted, "depth one 0.1"},
		{"0.3", 1, api.StatusRefused, "not me"},
		{"0.2.1", 2, api.StatusLoopDetected, ""}, // the same call, repeated
	} {
		res, _ := runScript(t, context.Background(), src, tc.path, tc.depth, &fakeSupervisor{})
		if res.Status != tc.status || res.Distillate.Text() != tc.text {
			t.Errorf("%s: %s %q, want %s %q", tc.path, res.Status, res.Distillate.Text(), tc.status, tc.text)
		}
	}
	res, _ := runScript(t, context.Background(), "[depth 3]\nanswer", "0", 0, &fakeSupervisor{})
	if res.Status != api.StatusCrashed || !strings.Contains(res.Detail, "no section for agent 0") {
		t.Fatalf("no section: %+v", res)
	}
}

func TestScriptSleepHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(20*time.Millisecond, func() { cancel(ErrCancelled) })
	res, _ := runScript(t, ctx, "[default]\nsleep 1h\nanswer \"never\"", "0", 0, &fakeSupervisor{})
	if res.Status != api.StatusCancelled {
		t.Fatalf("result %+v", res)
	}
}

// builtin:demo answers several lines with one async child per line, spawned
// in one turn and awaited; a line whose spawn is refused is answered locally.
func TestDemoFansOut(t *testing.T) {
	p := payload()
	p.Contract.Objective = "a b\n\n  c  \nd e f"
	sup := &fakeSupervisor{refuse: map[int]string{2: "spawn denied: max_inflight 4 reached"}}
	demo, err := intelligence.New(p.Intelligence, "")
	if err != nil {
		t.Fatal(err)
	}
	l := &Loop{Payload: p, Model: demo, Tools: offeredTools(p), Caller: sup, Report: &usageLog{}}
	res := l.Run(context.Background())
	if res.Status != api.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	want := "1. done: a b\n2. \"c\" has 1 words and 1 characters\n3. done: d e f"
	if res.Distillate.Text() != want {
		t.Fatalf("answer %q, want %q", res.Distillate.Text(), want)
	}
	if res.Usage.Steps != 3 || len(sup.calls) != 5 {
		t.Fatalf("steps %d, calls %d: want spawns in one turn, awaits in one, then the answer", res.Usage.Steps, len(sup.calls))
	}
}

func TestOfferedToolsIncludeSelfTools(t *testing.T) {
	p := payload()
	p.Tools = []api.ToolSpec{{Name: "github/search", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	got := offeredTools(p)
	var names []string
	for _, s := range got {
		names = append(names, s.Name+"="+s.Wire)
		var schema map[string]any
		if s.Wire != "github/search" && (json.Unmarshal(s.Parameters, &schema) != nil || schema["type"] != "object") {
			t.Errorf("%s: schema %s", s.Wire, s.Parameters)
		}
	}
	want := "subagent_spawn=subagent.spawn,subagent_status=subagent.status,subagent_await=subagent.await,subagent_cancel=subagent.cancel," +
		"subagent_ask=subagent.ask,subagent_answer=subagent.answer,subagent_steer=subagent.steer," +
		"resource_read=resource.read,resource_wait=resource.wait,github__search=github/search"
	if strings.Join(names, ",") != want {
		t.Fatalf("offered %v", names)
	}
}

// offeredTools makes its two lists once, at their size: grown by append,
// they left garbage every run (the warm pool's rehearsal among them, whose
// garbage stays on a waiting child's heap: figure 9). What it allocates
// beyond the self-tools' specs and the model's names for the tools is the
// two lists and resource.read's description.
func TestOfferedToolsAllocatesItsListsOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what is allocated")
	}
	p := payload()
	p.Tools = []api.ToolSpec{{Name: "github/search", InputSchema: json.RawMessage(`{}`)}, {Name: "github/read", InputSchema: json.RawMessage(`{}`)}}
	self := testing.AllocsPerRun(50, func() { api.SelfToolSpecs() })
	names := 0.0
	for _, s := range append(api.SelfToolSpecs(), p.Tools...) {
		names += testing.AllocsPerRun(50, func() { intelligence.ModelToolName(s.Name) })
	}
	if n := testing.AllocsPerRun(50, func() { offeredTools(p) }) - self - names; n > 3 {
		t.Fatalf("offeredTools allocated %v times beyond the specs and names, want at most 3", n)
	}
}

// TestOfferedToolsOfAnAgentType: a declared agent type that lists its
// self-tools is offered only those (and its granted tools).
func TestOfferedToolsOfAnAgentType(t *testing.T) {
	p := payload()
	p.Tools = []api.ToolSpec{{Name: "github/search", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	p.Agent = &api.AgentRole{Type: "reader", SelfTools: []string{api.ToolResourceRead}}
	var names []string
	for _, s := range offeredTools(p) {
		names = append(names, s.Wire)
	}
	if strings.Join(names, ",") != "resource.read,github/search" {
		t.Fatalf("offered %v", names)
	}
}
