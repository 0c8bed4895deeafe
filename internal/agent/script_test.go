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
)

func TestParseScript(t *testing.T) {
	good := `# comment
[default]
answer "leaf"

[depth 1]
call demo/echo {"text": "a b"}
spawn async "look at \"this\"" scope=demo/echo,demo/sum max_tokens=500 max_steps=3 deadline=2s provider=peer:b format=markdown
spawn detach "fire"
await
sleep 10ms
usage 12 3
refuse "no {path}"

[path 0.2.1]
spawn sync "again"
repeat
`
	sc, err := parseScript([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.sections) != 3 {
		t.Fatalf("sections = %d", len(sc.sections))
	}
	d1 := sc.sections[1].steps
	sp := d1[1].spawns[0]
	if sp.Disposition != api.DispositionAsync || sp.Contract.Objective != `look at "this"` || len(sp.Scope.Allow) != 2 ||
		sp.Limits.MaxTokens != 500 || sp.Limits.MaxSteps != 3 || sp.Limits.Deadline.D() != 2*time.Second ||
		sp.Provider != "peer:b" || sp.Contract.OutputFormat.Kind != api.FormatMarkdown {
		t.Fatalf("spawn step = %+v", sp)
	}
	if d1[5].usage != (api.Usage{TokensIn: 12, TokensOut: 3}) || d1[4].d != 10*time.Millisecond || d1[6].text != "no {path}" {
		t.Fatalf("steps = %+v", d1)
	}
	for _, tc := range []struct{ src, want string }{
		{"", "no [section]"},
		{"answer \"x\"", "line 1: a step before any [section]"},
		{"[default]\n[default]", "line 2: section [default] already defined on line 1"},
		{"[depth -1]", "line 1: depth"},
		{"[path 0.x]", "line 1: path"},
		{"[somewhere]", "line 1: a section header"},
		{"[default]\njump", `line 2: unknown step "jump"`},
		{"[default]\ncall", "line 2: call: want a tool name"},
		{"[default]\ncall a/b [1]", "line 2: call: the arguments must be one JSON object"},
		{"[default]\nspawn soon \"x\"", `line 2: spawn: disposition "soon"`},
		{"[default]\nspawn sync", "line 2: spawn: want a disposition and an objective"},
		{"[default]\nspawn sync \"x", "line 2: spawn: unterminated"},
		{"[default]\nspawn sync \"x\" scope=nope", `scope: "nope" is not SERVER/TOOL`},
		{"[default]\nspawn sync \"x\" color=red", `unknown option "color"`},
		{"[default]\nspawn sync \"x\" max_tokens=-1", "want a positive integer"},
		{"[default]\nsleep soon", "line 2: sleep: want a duration"},
		{"[default]\nusage 1 2 3", "line 2: usage: want IN [OUT]"},
		{"[default]\nanswer two words", "line 2: answer: quote the text"},
		{"[default]\nanswer \"x\"\ncall a/b", "line 3: never reached after the step on line 2"},
		{"[default]\nsleep 1s\nrepeat", "line 3: repeat in a section with no call, spawn, answer or refuse"},
		{"[default]\nawait 3", "line 2: await: takes no arguments"},
	} {
		_, err := parseScript([]byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.src, err, tc.want)
		}
	}
}

func FuzzParseScript(f *testing.F) {
	f.Add([]byte("[default]\nanswer \"x\"\n"))
	f.Add([]byte("[depth 0]\nspawn async \"a\\nb\" scope=s/t deadline=1s\nawait\nanswer \"{results}\"\n"))
	f.Add([]byte("[path 0.1]\ncall s/t {\"a\":[1,2]}\nusage 5\nrepeat\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		sc, err := parseScript(src)
		if err != nil {
			return
		}
		for _, sec := range sc.sections {
			for _, st := range sec.steps {
				if st.kind == stepCall && !json.Valid(st.args) {
					t.Fatalf("call step with invalid args %q", st.args)
				}
				for _, a := range st.spawns {
					if _, err := a.Disposition.Normalize(); err != nil {
						t.Fatalf("spawn step with a bad disposition: %v", err)
					}
				}
			}
			if k := len(sec.steps); k > 0 && sec.steps[k-1].kind == stepRepeat {
				turns := false
				for _, st := range sec.steps {
					turns = turns || st.turns()
				}
				if !turns {
					t.Fatal("a repeating section that never makes a turn")
				}
			}
		}
	})
}

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
	m, err := NewModel(api.Intelligence{Endpoint: "builtin:script=" + writeScript(t, src)}, "")
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
	l := &Loop{Payload: p, Model: newDemoModel(0), Tools: offeredTools(p), Caller: sup, Report: &usageLog{}}
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
		"resource_read=resource.read,resource_wait=resource.wait,github__search=github/search"
	if strings.Join(names, ",") != want {
		t.Fatalf("offered %v", names)
	}
}
