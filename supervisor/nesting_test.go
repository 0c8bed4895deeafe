package supervisor

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// The chokepoint refuses in the documented order: each state below violates
// every check from one point on, and fixing the first violated check reveals
// the next. A refusal changes nothing.
func TestChokepointRefusalOrder(t *testing.T) {
	clock := time.Unix(1_000_000, 0)
	tags := map[api.ToolRef]api.ToolTags{
		{Server: "t", Tool: "a"}: {UntrustedInput: true},
		{Server: "t", Tool: "b"}: {Sensitive: true},
		{Server: "t", Tool: "c"}: {Egress: true},
	}
	s, err := New(Config{
		Clock:    func() time.Time { return clock },
		ToolTags: func(r api.ToolRef) (api.ToolTags, bool) { v, ok := tags[r]; return v, ok },
		Caps:     Caps{MaxDepth: 2, MaxChildren: 2, MaxTotalSubagents: 5, MaxInflight: 1, SpawnBurst: 1, SpawnRate: 1, TreeTokenCeiling: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	all := []api.ToolRef{{Server: "t", Tool: "a"}, {Server: "t", Tool: "b"}, {Server: "t", Tool: "c"}}
	pl := testPayload("root", time.Minute)
	pl.AgentID, pl.AgentPath = "0", "0"
	pl.Scope = api.ToolScope{Allow: all, Tags: ScopeTags(all, s.cfg.ToolTags)}
	pl.Limits.MaxTokens = 500
	root := newNode("root", nil, pl)
	tr := newTree(root)
	pl.AgentID, pl.AgentPath, pl.Depth = "0.3", "0.3", 1
	parent := newNode("parent", root, pl)
	parent.nest = nest{tree: tr, disposition: api.DispositionSync, provider: localProvider}
	tr.nodes["parent"], tr.total = parent, 2

	args := &api.SpawnArgs{Disposition: api.DispositionAsync, Contract: api.OutputContract{Objective: ""},
		Scope: api.ToolScope{Allow: []api.ToolRef{{Server: "t", Tool: "x"}}}}
	tr.draining = true
	parent.children, parent.nest.inflight = []*node{newNode("a", parent, pl), newNode("b", parent, pl)}, 1
	tr.total, tr.tokens = 5, 1000
	tr.bucket.take(clock, 1, 1) // empty the bucket
	parent.usage = api.Usage{TokensIn: 500}

	steps := []struct {
		want string
		fix  func()
	}{
		{"spawn denied: tree draining", func() { tr.draining = false }},
		{"spawn denied: max_depth 1 reached", func() {
			c := s.Caps()
			c.MaxDepth = 2
			if err := s.SetCaps(c); err != nil { // an operator raises the cap at run time
				t.Fatal(err)
			}
		}},
		{"spawn denied: node child cap reached", func() { parent.children = nil }},
		{"spawn denied: max_inflight 1 reached", func() { parent.nest.inflight = 0 }},
		{"spawn denied: tree subagent cap reached", func() { tr.total = 2 }},
		{"spawn denied: spawn rate exceeded", func() { clock = clock.Add(time.Second) }},
		{"spawn denied: tree token ceiling", func() { tr.tokens = 0; clock = clock.Add(time.Second) }},
		{"spawn denied: missing objective/output-contract", func() { args.Contract.Objective = "work"; clock = clock.Add(time.Second) }},
		{"spawn denied: scope widens: t/x", func() { args.Scope.Allow = all; clock = clock.Add(time.Second) }},
		{"spawn denied: rule of two: the scope would hold untrusted_input, sensitive and egress", func() {
			args.Scope.Allow = all[:2]
			clock = clock.Add(time.Second)
		}},
		{"spawn denied: the parent's token grant is exhausted", func() { parent.usage = api.Usage{TokensIn: 100}; clock = clock.Add(time.Second) }},
	}
	s.SetCaps(Caps{MaxDepth: 1, MaxChildren: 2, MaxTotalSubagents: 5, MaxInflight: 1, SpawnBurst: 1, SpawnRate: 1, TreeTokenCeiling: 1000})
	for _, st := range steps {
		before := [3]int{tr.total, parent.nest.inflight, len(parent.children)}
		child, got := s.admit(parent, args, time.Now())
		if child != nil || got != st.want {
			t.Fatalf("refusal = %q, want %q", got, st.want)
		}
		if after := [3]int{tr.total, parent.nest.inflight, len(parent.children)}; after != before {
			t.Fatalf("refusal %q changed the counters: %v -> %v", got, before, after)
		}
		st.fix()
	}

	// Admitted: forged identity discarded, identity minted, scope narrowed,
	// limits clamped to what the parent (500-100) and the tree (1000) afford.
	forged := 0
	args.Depth, args.AgentID, args.AgentPath, args.Parent = &forged, "0", "0", "someone"
	args.Limits = api.Limits{MaxTokens: 10_000, MaxSteps: 1000, Deadline: api.Duration(time.Hour)}
	child, refusal := s.admit(parent, args, time.Now())
	if refusal != "" {
		t.Fatalf("refused: %s", refusal)
	}
	defer func() { // never started: unregister it
		s.mu.Lock()
		delete(s.nodes, child.handle)
		s.mu.Unlock()
		s.wg.Done()
	}()
	p := child.payload
	if p.AgentID != "0.3.1" || p.AgentPath != "0.3.1" || p.Depth != 2 || child.parent != parent {
		t.Fatalf("identity = %s %s depth %d", p.AgentID, p.AgentPath, p.Depth)
	}
	if p.Limits.MaxTokens != 400 || p.Limits.MaxSteps != 5 || p.Limits.Deadline.D() > time.Minute || p.Limits.Deadline <= 0 {
		t.Fatalf("limits not clamped: %+v", p.Limits)
	}
	if len(p.Scope.Allow) != 2 || p.Scope.Tags != (api.ToolTags{UntrustedInput: true, Sensitive: true}) || len(p.Tools) != 2 || p.Tools[0].Name != "t/a" {
		t.Fatalf("scope = %+v tools %+v", p.Scope, p.Tools)
	}
	if tr.total != 3 || len(parent.children) != 1 || parent.nest.inflight != 1 || tr.nodes[child.handle] != child {
		t.Fatalf("counters after admission: total %d children %d inflight %d", tr.total, len(parent.children), parent.nest.inflight)
	}
}

func TestSpawnBucket(t *testing.T) {
	t0 := time.Unix(0, 0)
	var b bucket
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true}, {0, true}, {0, true}, {0, true}, {0, true}, {0, true}, {0, true}, {0, true}, // burst 8
		{0, false},
		{400 * time.Millisecond, false}, // 0.8 of a token
		{500 * time.Millisecond, true},  // 1.0
		{500 * time.Millisecond, false},
		{time.Hour, true}, // refilled, capped at the burst
		{time.Hour, true}, {time.Hour, true}, {time.Hour, true}, {time.Hour, true}, {time.Hour, true}, {time.Hour, true}, {time.Hour, true},
		{time.Hour, false},
		{time.Hour - time.Second, false}, // a clock going back refills nothing
	}
	for i, st := range steps {
		if got := b.take(t0.Add(st.at), 8, 2); got != st.want {
			t.Fatalf("take %d at %s = %v, want %v", i, st.at, got, st.want)
		}
	}
}

func TestClampLimits(t *testing.T) {
	caps := DefaultCaps
	pl := testPayload("p", time.Minute)
	pl.Limits = api.Limits{MaxSteps: 20, MaxTokens: 1000, Deadline: api.Duration(time.Minute), MaxChildren: 3, MaxRepeats: 7, DistillateBudget: 200}
	now := time.Now()
	for _, tc := range []struct {
		name       string
		req        api.Limits
		used, tree int64
		want       api.Limits
		refusal    string
	}{
		{"inherit", api.Limits{}, 0, 0, api.Limits{MaxSteps: 20, MaxTokens: 1000, MaxChildren: 3}, ""},
		{"narrower", api.Limits{MaxSteps: 5, MaxTokens: 10, MaxChildren: 1, Deadline: api.Duration(time.Second)}, 0, 0,
			api.Limits{MaxSteps: 5, MaxTokens: 10, MaxChildren: 1, Deadline: api.Duration(time.Second)}, ""},
		{"wider is clamped", api.Limits{MaxSteps: 500, MaxTokens: 1 << 40, MaxChildren: 100, Deadline: api.Duration(time.Hour)}, 300, 0,
			api.Limits{MaxSteps: 20, MaxTokens: 700, MaxChildren: 3}, ""},
		{"tree is the bound", api.Limits{}, 0, caps.TreeTokenCeiling - 50, api.Limits{MaxSteps: 20, MaxTokens: 50, MaxChildren: 3}, ""},
		{"parent spent", api.Limits{}, 1000, 0, api.Limits{}, refuseGrantExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := newNode("p", nil, pl)
			parent.deadline = now.Add(time.Minute)
			parent.usage = api.Usage{TokensIn: tc.used}
			got, refusal := clampLimits(parent, tc.req, caps, tc.tree, now)
			if refusal != tc.refusal {
				t.Fatalf("refusal %q, want %q", refusal, tc.refusal)
			}
			if refusal != "" {
				return
			}
			if tc.want.Deadline == 0 {
				tc.want.Deadline = api.Duration(time.Minute) // the parent's remaining time
			}
			// The loop detector and the distillate budget are the parent's,
			// whatever the child asks for.
			tc.want.MaxRepeats, tc.want.DistillateBudget = 7, 200
			if got != tc.want {
				t.Fatalf("limits = %+v, want %+v", got, tc.want)
			}
		})
	}
	parent := newNode("p", nil, pl)
	parent.deadline = now.Add(-time.Second)
	if _, refusal := clampLimits(parent, api.Limits{}, caps, 0, now); refusal != refuseDeadlinePassed {
		t.Fatalf("past deadline: %q", refusal)
	}
}

func TestRuleOfTwoGate(t *testing.T) {
	tags := map[api.ToolRef]api.ToolTags{
		{Server: "mail", Tool: "send"}: {Egress: true},
		{Server: "vault", Tool: "get"}: {Sensitive: true},
		{Server: "web", Tool: "fetch"}: {UntrustedInput: true, Egress: true},
	}
	tagger := func(r api.ToolRef) (api.ToolTags, bool) { v, ok := tags[r]; return v, ok }
	ref := func(s, t string) api.ToolRef { return api.ToolRef{Server: s, Tool: t} }
	for _, tc := range []struct {
		name  string
		grant []api.ToolRef
		allow bool
		want  bool // refused
	}{
		{"empty", nil, false, false},
		{"two legs", []api.ToolRef{ref("mail", "send"), ref("vault", "get")}, false, false},
		{"three legs", []api.ToolRef{ref("web", "fetch"), ref("vault", "get")}, false, true},
		{"untagged counts as untrusted input", []api.ToolRef{ref("mail", "send"), ref("vault", "get"), ref("misc", "x")}, false, true},
		{"overridden", []api.ToolRef{ref("web", "fetch"), ref("vault", "get")}, true, false},
	} {
		err := CheckRootGrant(ScopeTags(tc.grant, tagger), tc.allow)
		if (err != nil) != tc.want {
			t.Errorf("%s: err = %v, want refused %v", tc.name, err, tc.want)
		}
	}
	if got := ScopeTags([]api.ToolRef{ref("a", "b")}, nil); got != Untagged {
		t.Errorf("nil tagger: %+v", got)
	}
}

// A parent cannot choose its child's depth, id, path or parent edge.
func TestForgedIdentityIgnored(t *testing.T) {
	s, rec := newNestingSupervisor(t)
	deep := 99
	forge := func(a *api.SpawnArgs) { a.Depth, a.AgentID, a.AgentPath, a.Parent = &deep, "0", "0", "nobody" }
	r, res := runProg(t, s, prog{Calls: []progCall{
		spawnCall(prog{}, api.DispositionSync, forge),
		spawnCall(prog{}, api.DispositionSync, forge),
	}})
	if res.Status != api.StatusCompleted {
		t.Fatalf("root: %+v", res)
	}
	for i, want := range []string{"0.1", "0.2"} {
		cr := childReportOf(t, report(t, res).Results[i])
		if cr.Status != api.StatusCompleted || cr.AgentPath != want {
			t.Fatalf("child %d: %+v", i, cr)
		}
		child := report(t, api.SubagentResult{Distillate: *cr.Distillate})
		if child.AgentID != want || child.AgentPath != want || child.Depth != 1 {
			t.Fatalf("child %d saw identity %s %s depth %d", i, child.AgentID, child.AgentPath, child.Depth)
		}
		if f, _ := rec.byPath(want); f.info.ParentHandle != r.Handle() || f.info.Depth != 1 {
			t.Fatalf("child %d recorded with parent %q depth %d", i, f.info.ParentHandle, f.info.Depth)
		}
	}
}

// toolBox is an in-process tool server: every tool echoes its name.
type toolBox struct{}

func (toolBox) Call(ctx context.Context, caller NodeInfo, tool string, args json.RawMessage) api.ToolResult {
	return api.TextResult("t/"+tool+" ran for "+caller.AgentPath, false)
}

func (toolBox) Describe(tool string) (api.ToolSpec, bool) {
	return api.ToolSpec{Name: "t/" + tool, Description: "the " + tool + " tool", InputSchema: json.RawMessage(`{"type":"object"}`)}, true
}

// Scope only narrows: a child gets exactly the tools it was granted, a grant
// wider than the parent's is refused, and a child never sees a tool its
// parent lacked.
func TestScopeNarrowing(t *testing.T) {
	s, _ := newNestingSupervisor(t, func(c *Config) {
		c.Tools = map[string]ToolServer{"t": toolBox{}}
		c.ToolTags = func(r api.ToolRef) (api.ToolTags, bool) {
			return api.ToolTags{Sensitive: r.Tool == "b", UntrustedInput: r.Tool == "a"}, true
		}
	})
	ta, tb := api.ToolRef{Server: "t", Tool: "a"}, api.ToolRef{Server: "t", Tool: "b"}
	scope := func(refs ...api.ToolRef) func(*api.SpawnArgs) {
		return func(a *api.SpawnArgs) { a.Scope.Allow = refs }
	}
	child := prog{Calls: []progCall{
		rawCall("t/a", map[string]any{}),
		rawCall("t/b", map[string]any{}),
		spawnCall(prog{}, api.DispositionSync, scope(tb)), // the grandchild asks for what its parent lacks
		spawnCall(prog{}, api.DispositionSync, scope(ta)),
	}}
	_, res := runProg(t, s, prog{Calls: []progCall{
		spawnCall(child, api.DispositionSync, scope(ta)),
		spawnCall(prog{}, api.DispositionSync, scope(api.ToolRef{Server: "t", Tool: "c"})),
		spawnCall(prog{}, api.DispositionSync, scope(tb, api.ToolRef{Server: "u", Tool: "a"})),
		spawnCall(prog{Calls: []progCall{rawCall("t/a", map[string]any{})}}, api.DispositionSync),
	}}, func(p *api.SpawnPayload) { p.Scope.Allow = []api.ToolRef{ta, tb} })
	root := report(t, res)
	if len(root.Tools) != 2 || root.Tags != (api.ToolTags{UntrustedInput: true, Sensitive: true}) {
		t.Fatalf("root grant: tools %v tags %+v", root.Tools, root.Tags)
	}
	for i, want := range map[int]string{1: "spawn denied: scope widens: t/c", 2: "spawn denied: scope widens: u/a"} {
		if r := root.Results[i]; !r.IsError || r.Text != want {
			t.Errorf("spawn %d: %+v, want refusal %q", i, r, want)
		}
	}
	narrowed := report(t, api.SubagentResult{Distillate: *childReportOf(t, root.Results[0]).Distillate})
	if len(narrowed.Tools) != 1 || narrowed.Tools[0] != "t/a" || len(narrowed.Scope) != 1 || narrowed.Tags != (api.ToolTags{UntrustedInput: true}) {
		t.Fatalf("narrowed child: tools %v scope %v tags %+v", narrowed.Tools, narrowed.Scope, narrowed.Tags)
	}
	want := []progResult{
		{Tool: "t/a", Text: "t/a ran for 0.1"},
		{Tool: "t/b", IsError: true, Text: `tool "t/b" is not in this subagent's scope`},
		{Tool: api.ToolSpawn, IsError: true, Text: "spawn denied: scope widens: t/b"},
	}
	for i, w := range want {
		if narrowed.Results[i] != w {
			t.Errorf("narrowed child call %d: %+v, want %+v", i, narrowed.Results[i], w)
		}
	}
	grand := report(t, api.SubagentResult{Distillate: *childReportOf(t, narrowed.Results[3]).Distillate})
	if len(grand.Tools) != 1 || grand.AgentPath != "0.1.1" {
		t.Fatalf("grandchild within the child's grant: %+v", grand)
	}
	none := report(t, api.SubagentResult{Distillate: *childReportOf(t, root.Results[3]).Distillate})
	if len(none.Tools) != 0 || !none.Results[0].IsError {
		t.Fatalf("a child granted nothing holds nothing: %+v", none)
	}
}

// Eight async children fanned out and awaited; the fifth unfinished one is
// refused with the max_inflight reason, and is admitted again once slots free.
func TestAsyncFanOutAndInflight(t *testing.T) {
	s, rec := newNestingSupervisor(t)
	g := newGate(t)
	go func() { // the children finish only once the fifth spawn was refused
		testkit.WaitFor(t, 10*time.Second, "max_inflight reached in the log", func() bool { return strings.Contains(rec.logs.String(), "max_inflight 4 reached") })
		g.open(t)
	}()
	kid := func(i int) progCall {
		return spawnCall(prog{WaitFile: string(g), Answer: "kid " + itoa(i)}, api.DispositionAsync)
	}
	calls := []progCall{kid(1), kid(2), kid(3), kid(4), kid(5)} // 0..4; 4 is refused
	for i := 0; i < 4; i++ {
		calls = append(calls, onHandle(api.ToolAwait, i)) // 5..8
	}
	calls = append(calls, kid(5), kid(6), kid(7), kid(8)) // 9..12
	for i := 9; i < 13; i++ {
		calls = append(calls, onHandle(api.ToolAwait, i)) // 13..16
	}
	_, res := runProg(t, s, prog{Calls: calls})
	if res.Status != api.StatusCompleted {
		t.Fatalf("root: %+v", res)
	}
	rs := report(t, res).Results
	if r := rs[4]; !r.IsError || r.Text != "spawn denied: max_inflight 4 reached" {
		t.Fatalf("fifth async spawn: %+v", r)
	}
	for _, i := range []int{0, 1, 2, 3, 9, 10, 11, 12} {
		if cr := childReportOf(t, rs[i]); cr.State != api.ChildRunning || cr.ResourceURI != "agent://subagent/"+cr.Handle {
			t.Fatalf("async spawn %d answered %+v, want a handle at once", i, cr)
		}
	}
	var got []string
	for i := 5; i < 17; i++ {
		if i >= 9 && i < 13 {
			continue
		}
		cr := childReportOf(t, rs[i])
		if cr.State != api.ChildFinished || cr.Status != api.StatusCompleted {
			t.Fatalf("await %d: %+v", i, cr)
		}
		got = append(got, cr.Distillate.Text())
	}
	if strings.Join(got, ",") != "kid 1,kid 2,kid 3,kid 4,kid 5,kid 6,kid 7,kid 8" {
		t.Fatalf("distillates %v", got)
	}
	if n := len(rec.startedPaths()); n != 9 {
		t.Fatalf("%d subagents started, want the root and 8 children", n)
	}
}

// A burst of 20 spawns at one instant: the bucket's 8 pass, the rest are
// refused by rate.
func TestSpawnBurstRefusedByRate(t *testing.T) {
	frozen := time.Unix(1_000_000, 0)
	s, _ := newNestingSupervisor(t, func(c *Config) {
		c.Clock = func() time.Time { return frozen }
		c.Caps = Caps{MaxChildren: 32}
	})
	var calls []progCall
	for i := 0; i < 20; i++ {
		calls = append(calls, spawnCall(prog{Answer: "ok"}, api.DispositionDetach))
	}
	_, res := runProg(t, s, prog{Calls: calls}, func(p *api.SpawnPayload) { p.Limits.MaxChildren = 32 })
	passed, refused := 0, 0
	for _, r := range report(t, res).Results {
		switch {
		case !r.IsError:
			passed++
		case r.Text == "spawn denied: spawn rate exceeded":
			refused++
		default:
			t.Fatalf("unexpected result %+v", r)
		}
	}
	if passed != 8 || refused != 12 {
		t.Fatalf("passed %d refused %d, want 8 and 12", passed, refused)
	}
}

// A node over its own token grant loses its subtree, killed with
// exhausted_tokens; its sibling is spared. The node under-reports in its
// result, but the supervisor's count stands, and it overran its grant by at
// most one model call's tokens.
func TestNodeOverrunLosesOnlyItsSubtree(t *testing.T) {
	s, rec := newNestingSupervisor(t)
	hog := prog{Calls: []progCall{spawnCall(prog{Hold: true}, api.DispositionAsync)}, Spend: 400}
	_, res := runProg(t, s, prog{Calls: []progCall{
		spawnCall(hog, api.DispositionAsync, func(a *api.SpawnArgs) { a.Limits.MaxTokens = 1000 }),
		spawnCall(prog{SleepMS: 200, Answer: "sibling done"}, api.DispositionAsync),
		onHandle(api.ToolAwait, 0),
		onHandle(api.ToolAwait, 1),
	}})
	if res.Status != api.StatusCompleted {
		t.Fatalf("root: %+v", res)
	}
	hogRes, _ := rec.byPath("0.1")
	if hogRes.res.Status != api.StatusExhaustedTokens {
		t.Fatalf("hog: %+v", hogRes.res)
	}
	if used := hogRes.res.Usage.Tokens(); used <= 1000 || used > 1000+400 {
		t.Fatalf("hog used %d tokens on a grant of 1000 (one call is 400)", used)
	}
	if g, _ := rec.byPath("0.1.1"); g.res.Status != api.StatusCancelled {
		t.Fatalf("hog's child: %+v", g.res)
	}
	sib, _ := rec.byPath("0.2")
	if sib.res.Status != api.StatusCompleted || sib.res.Distillate.Text() != "sibling done" {
		t.Fatalf("sibling: %+v", sib.res)
	}
	rs := report(t, res).Results
	if cr := childReportOf(t, rs[2]); cr.Status != api.StatusExhaustedTokens {
		t.Fatalf("the parent's await saw %+v", cr)
	}
	// The overrun is the supervisor's verdict on the hog, counted as such, and
	// the hog is SIGKILLed at once (one rung), never sent ctrl/cancel.
	wantVerdicts(t, s, map[string]int64{string(api.StatusExhaustedTokens): 1})
	if st := s.Stats(); st.Kills < 1 {
		t.Errorf("SIGKILL rungs = %d, want the hog's", st.Kills)
	}
	for _, line := range strings.Split(rec.logs.String(), "\n") {
		if strings.Contains(line, `"msg":"kill ladder: ctrl/cancel"`) && strings.Contains(line, `"agent_path":"0.1",`) {
			t.Errorf("the hog was sent ctrl/cancel after its SIGKILL: %s", line)
		}
	}
}

// The tree over its token ceiling drains whole: every node stopped, spawns
// refused while it drains, and the root ends exhausted_tokens (exit 7).
func TestTreeCeilingDrainsTheTree(t *testing.T) {
	s, rec := newNestingSupervisor(t, func(c *Config) {
		c.Caps = Caps{TreeTokenCeiling: 2000}
		c.DrainGrace = 5 * time.Second // every node answers ctrl/cancel; none needs SIGTERM
	})
	_, res := runProg(t, s, prog{
		Calls: []progCall{
			spawnCall(prog{Hold: true}, api.DispositionAsync),
			spawnCall(prog{Spend: 500}, api.DispositionAsync),
		},
		Hold:     true,
		OnCancel: []progCall{spawnCall(prog{}, api.DispositionSync)},
	})
	if res.Status != api.StatusExhaustedTokens || res.Cause != api.CauseTreeTokenCeiling || api.ExitCode(res) != api.ExitBudget {
		t.Fatalf("root: %+v (exit %d)", res, api.ExitCode(res))
	}
	for _, p := range []string{"0.1", "0.2"} {
		if f, ok := rec.byPath(p); !ok || f.res.Status != api.StatusCancelled {
			t.Fatalf("%s: %+v", p, f.res)
		}
	}
	rs := report(t, res).Results
	if last := rs[len(rs)-1]; !last.IsError || last.Text != "spawn denied: tree draining" {
		t.Fatalf("spawn while draining: %+v", last)
	}
}

// A detached child outlives its parent: it is still counted and reaped, and
// its result is recorded after the parent finished. Shutdown reaches a
// detached child whose ancestors have all ended.
func TestDetachedChildOutlivesItsParent(t *testing.T) {
	s, rec := newNestingSupervisor(t)
	g := newGate(t)
	pl := testPayload(prog{Calls: []progCall{
		spawnCall(prog{WaitFile: string(g), Answer: "late"}, api.DispositionDetach),
		spawnCall(prog{Hold: true}, api.DispositionDetach),
	}}.objective(), time.Minute)
	r := start(t, s, pl)
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted {
		t.Fatalf("root: %+v", res)
	}
	g.open(t) // the parent has finished: let the detached child answer
	for _, cr := range report(t, res).Results {
		if cr.IsError {
			t.Fatalf("detach refused: %+v", cr)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "node 0.1 started", func() bool { _, ok := rec.byPath("0.1"); return ok })
	late, _ := rec.byPath("0.1")
	root, _ := rec.byPath("0")
	if late.res.Status != api.StatusCompleted || late.res.Distillate.Text() != "late" || !late.at.After(root.at) {
		t.Fatalf("detached child: %+v, finished %v after the root", late.res, late.at.Sub(root.at))
	}
	if _, ok := rec.byPath("0.2"); ok {
		t.Fatal("the holding detached child ended with its parent")
	}
	select {
	case <-r.TreeDone():
		t.Fatal("tree done while a detached child runs")
	default:
	}
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if f, ok := rec.byPath("0.2"); !ok || f.res.Status != api.StatusCancelled {
		t.Fatalf("after shutdown: %+v", f.res)
	}
	<-r.TreeDone()
}

// Cancelling a parent by handle (tasks/cancel reaches Supervisor.Cancel) stops
// its whole subtree; the grandparent goes on.
func TestCancelNestedHandleKillsItsSubtree(t *testing.T) {
	s, rec := newNestingSupervisor(t)
	mid := prog{Calls: []progCall{spawnCall(prog{Hold: true}, api.DispositionSync)}}
	r := start(t, s, testPayload(prog{Calls: []progCall{spawnCall(mid, api.DispositionAsync), onHandle(api.ToolAwait, 0)}}.objective(), time.Minute))
	var midInfo NodeInfo
	testkit.WaitFor(t, 10*time.Second, "nodes 0.1 and 0.1.1 started", func() bool {
		paths := rec.startedPaths()
		midInfo = paths["0.1"]
		_, leaf := paths["0.1.1"]
		return leaf
	})
	if !s.Cancel(midInfo.Handle, "test") {
		t.Fatal("no live subagent with the nested handle")
	}
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted {
		t.Fatalf("root: %+v", res)
	}
	<-r.TreeDone()
	for _, p := range []string{"0.1", "0.1.1"} {
		if f, _ := rec.byPath(p); f.res.Status != api.StatusCancelled {
			t.Fatalf("%s: %+v", p, f.res)
		}
	}
	for _, n := range []string{"0.1", "0.1.1"} {
		testkit.WaitGroupGone(t, rec.startedPaths()[n].PID)
	}
}

// fakeDelegator runs "peer:echo" delegations at once and "peer:stuck" ones
// until cancelled.
type fakeDelegator struct {
	mu        sync.Mutex
	cancelled []string
}

type fakeRemote struct {
	d      *fakeDelegator
	done   chan struct{}
	res    api.SubagentResult
	once   sync.Once
	handle string
}

func (r *fakeRemote) Done() <-chan struct{}      { return r.done }
func (r *fakeRemote) Result() api.SubagentResult { <-r.done; return r.res }
func (r *fakeRemote) Cancel(reason string) {
	r.once.Do(func() {
		r.d.mu.Lock()
		r.d.cancelled = append(r.d.cancelled, r.handle)
		r.d.mu.Unlock()
		r.res = api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText("")}
		close(r.done)
	})
}

func (d *fakeDelegator) Delegate(ctx context.Context, provider, handle string, p api.SpawnPayload) (Remote, error) {
	r := &fakeRemote{d: d, done: make(chan struct{}), handle: handle}
	switch provider {
	case "peer:echo":
		r.res = api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("remote " + p.AgentPath + ": " + p.Contract.Objective),
			Usage: api.Usage{TokensIn: 70, TokensOut: 30, Steps: 2}}
		r.once.Do(func() { close(r.done) })
	case "peer:stuck":
	default:
		return nil, context.Canceled
	}
	return r, nil
}

// A spawn naming a non-local provider goes through the Delegator, admitted by
// the same chokepoint; its deadline is enforced locally and its usage counts
// against the tree. Without a Delegator the provider is refused by name.
func TestNonLocalProvider(t *testing.T) {
	d := &fakeDelegator{}
	s, rec := newNestingSupervisor(t, func(c *Config) { c.Delegator = d })
	peer := func(name string, deadline time.Duration) func(*api.SpawnArgs) {
		return func(a *api.SpawnArgs) { a.Provider = name; a.Limits.Deadline = api.Duration(deadline) }
	}
	r, res := runProg(t, s, prog{Calls: []progCall{
		{Tool: api.ToolSpawn, Args: json.RawMessage(`{"contract":{"objective":"ask b"},"provider":"peer:echo"}`)},
		spawnCall(prog{}, api.DispositionSync, peer("peer:stuck", 200*time.Millisecond)),
	}})
	rs := report(t, res).Results
	if cr := childReportOf(t, rs[0]); cr.Status != api.StatusCompleted || cr.Distillate.Text() != "remote 0.1: ask b" {
		t.Fatalf("remote child: %+v", cr)
	}
	if cr := childReportOf(t, rs[1]); cr.Status != api.StatusDeadline {
		t.Fatalf("stuck remote child: %+v", cr)
	}
	if f, _ := rec.byPath("0.1"); f.info.Provider != "peer:echo" {
		t.Fatalf("provider recorded as %q", f.info.Provider)
	}
	d.mu.Lock()
	if len(d.cancelled) != 1 {
		t.Fatalf("cancelled remotes: %v", d.cancelled)
	}
	d.mu.Unlock()
	if r.TreeUsage() < 100 {
		t.Fatalf("the remote's usage is not in the tree's count: %d", r.TreeUsage())
	}

	s2, _ := newNestingSupervisor(t)
	_, res = runProg(t, s2, prog{Calls: []progCall{
		{Tool: api.ToolSpawn, Args: json.RawMessage(`{"contract":{"objective":"ask b"},"provider":"peer:echo"}`)},
	}})
	if r := report(t, res).Results[0]; !r.IsError || r.Text != `spawn denied: unknown provider "peer:echo"` {
		t.Fatalf("without a delegator: %+v", r)
	}
}

// The self-tools only reach a caller's own descendants, and bad arguments are
// tool errors, never protocol errors.
func TestSelfToolsOnHandles(t *testing.T) {
	s, _ := newNestingSupervisor(t)
	_, res := runProg(t, s, prog{Calls: []progCall{
		spawnCall(prog{Hold: true}, api.DispositionAsync),
		onHandle(api.ToolStatus, 0),
		rawCall(api.ToolAwait, map[string]any{"handle": "not-a-handle"}),
		{Tool: api.ToolSpawn, Args: json.RawMessage(`"just do it"`)},
		{Tool: api.ToolSpawn, Args: json.RawMessage(`{"contract":{"objective":"x"},"disposition":"later"}`)},
		onHandle(api.ToolCancel, 0),
		onHandle(api.ToolAwait, 0),
		onHandle(api.ToolCancel, 0),
	}})
	rs := report(t, res).Results
	if cr := childReportOf(t, rs[1]); cr.State != api.ChildRunning || cr.AgentPath != "0.1" {
		t.Fatalf("status: %+v", cr)
	}
	for i, prefix := range map[int]string{
		2: `subagent.await: no subagent with handle "not-a-handle" below this one`,
		3: "spawn denied: bad arguments:",
		4: `spawn denied: bad arguments: disposition "later"`,
	} {
		if !rs[i].IsError || !strings.HasPrefix(rs[i].Text, prefix) {
			t.Errorf("call %d: %+v, want an error starting %q", i, rs[i], prefix)
		}
	}
	if cr := childReportOf(t, rs[5]); cr.Cancelled == nil || !*cr.Cancelled || cr.SubtreeSize != 1 {
		t.Fatalf("cancel: %+v", cr)
	}
	if cr := childReportOf(t, rs[6]); cr.Status != api.StatusCancelled {
		t.Fatalf("await after cancel: %+v", cr)
	}
	if cr := childReportOf(t, rs[7]); cr.Cancelled == nil || *cr.Cancelled {
		t.Fatalf("cancel of a finished child: %+v", cr)
	}
}

// A tree started by a delegation deep in the mesh nests only the depth the
// mesh has left it: at mesh depth 3 of 4 its root may have children but not
// grandchildren, at 4 of 4 not even children; without a mesh cap max_depth
// alone applies.
func TestMeshDepthCapsTheTree(t *testing.T) {
	s, _ := newNestingSupervisor(t)
	grandchild := prog{Answer: "grandchild"}
	child := prog{Calls: []progCall{spawnCall(grandchild, api.DispositionSync)}}
	root := prog{Calls: []progCall{spawnCall(child, api.DispositionSync)}}
	run := func(meshDepth, meshMax int) progReport {
		t.Helper()
		pl := testPayload(root.objective(), time.Minute)
		pl.Limits.MaxSteps, pl.Limits.MaxTokens = 50, 100000
		r, err := s.Start(context.Background(), StartRequest{Payload: pl, MeshDepth: meshDepth, MeshMaxDepth: meshMax})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.TreeDone():
		case <-time.After(30 * time.Second):
			t.Fatal("tree did not end within 30s")
		}
		return report(t, r.Result())
	}
	childResults := func(rep progReport) []progResult {
		t.Helper()
		cr := childReportOf(t, rep.Results[0])
		var inner progReport
		if err := json.Unmarshal([]byte(cr.Distillate.Text()), &inner); err != nil {
			t.Fatalf("child's answer: %v: %q", err, cr.Distillate.Text())
		}
		return inner.Results
	}

	if rs := childResults(run(3, 4)); len(rs) != 1 || !rs[0].IsError || rs[0].Text != "spawn denied: max_depth 1 reached" {
		t.Fatalf("at mesh depth 3 of 4, the child's spawn: %+v", rs)
	}
	if rs := run(4, 4).Results; len(rs) != 1 || !rs[0].IsError || rs[0].Text != "spawn denied: max_depth 0 reached" {
		t.Fatalf("at mesh depth 4 of 4, the root's spawn: %+v", rs)
	}
	if rs := childResults(run(0, 0)); len(rs) != 1 || rs[0].IsError || childReportOf(t, rs[0]).Distillate.Text() != "grandchild" {
		t.Fatalf("without a mesh cap, the grandchild: %+v", rs)
	}
}
