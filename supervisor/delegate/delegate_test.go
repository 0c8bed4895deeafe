package delegate

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentd/agentd/api"
)

// stub is a provider that records what it was asked and finishes at once.
type stub struct {
	name     string
	caps     Capabilities
	prepared int
	prepErr  error

	mu   sync.Mutex
	reqs []Request
}

func (s *stub) Name() string                { return s.name }
func (s *stub) Capabilities() Capabilities  { return s.caps }
func (s *stub) InheritsParentContext() bool { return false }
func (s *stub) Prepare(ctx context.Context) error {
	s.prepared++
	return s.prepErr
}
func (s *stub) Start(ctx context.Context, req Request) (Run, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	done := make(chan struct{})
	close(done)
	return doneRun{done: done, res: api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText(req.Payload.Contract.Objective), Usage: api.Usage{TokensIn: 2}}}, nil
}

type doneRun struct {
	done chan struct{}
	res  api.SubagentResult
}

func (d doneRun) ID() string                 { return "r" }
func (d doneRun) Done() <-chan struct{}      { return d.done }
func (d doneRun) Result() api.SubagentResult { return d.res }
func (d doneRun) Cancel(string)              {}

func TestRouteRules(t *testing.T) {
	r := &Router{}
	local, peer := &stub{name: LocalName}, &stub{name: "peer:b"}
	r.Register(local)
	r.Register(peer)
	if err := r.Register(&stub{name: LocalName}); err == nil {
		t.Fatal("a name registered twice")
	}
	r.SetRules([]Rule{{Skill: "research", Provider: "peer:b"}})
	for _, tc := range []struct {
		req  Request
		want string
	}{
		{Request{}, LocalName},
		{Request{Skill: "research"}, "peer:b"},
		{Request{Skill: "other"}, LocalName},
		{Request{Skill: "research", Provider: LocalName}, LocalName},
	} {
		p, err := r.Route(tc.req)
		if err != nil || p.Name() != tc.want {
			t.Errorf("%+v routed to %v (%v), want %s", tc.req, p, err, tc.want)
		}
	}
	r.SetRules([]Rule{{Skill: AnySkill, Provider: "peer:b"}})
	if p, _ := r.Route(Request{Skill: "anything"}); p.Name() != "peer:b" {
		t.Fatal("the wildcard rule did not match")
	}
	if _, err := r.Route(Request{Provider: "peer:zz"}); !errors.Is(err, ErrUnknownProvider) {
		t.Fatalf("unknown provider: %v", err)
	}
}

// The router prepares a provider before it reads the capabilities, and a
// missing capability is refused before Start.
func TestStartPreparesThenChecks(t *testing.T) {
	r := &Router{}
	p := &stub{name: "peer:b"}
	r.Register(p)
	req := Request{Provider: "peer:b", Payload: api.SpawnPayload{Scope: api.ToolScope{Allow: []api.ToolRef{{Server: "s", Tool: "t"}}}}}
	if _, err := r.Start(context.Background(), req); !errors.Is(err, ErrUnsupportedCapability) {
		t.Fatalf("missing tool_filter: %v", err)
	}
	if p.prepared != 1 || len(p.reqs) != 0 {
		t.Fatalf("prepared %d, started %d", p.prepared, len(p.reqs))
	}
	p.prepErr = errors.New("card unreadable")
	if _, err := r.Start(context.Background(), Request{Provider: "peer:b"}); err == nil {
		t.Fatal("a failed Prepare did not refuse")
	}
}

func TestNeeds(t *testing.T) {
	n := Needs(Request{DepthLimit: 1, Payload: api.SpawnPayload{
		Contract: api.OutputContract{OutputFormat: api.OutputFormat{Kind: api.FormatJSON, Schema: []byte(`{}`)}},
		Limits:   api.Limits{MaxChildren: 2},
		Scope:    api.ToolScope{Allow: []api.ToolRef{{Server: "s", Tool: "t"}}},
	}})
	if n != (Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}) {
		t.Fatalf("%+v", n)
	}
	// The limits every request carries ask for nothing.
	plain := Needs(Request{Payload: api.SpawnPayload{Limits: api.Limits{MaxSteps: 5, MaxTokens: 9, MaxChildren: 8}}})
	if plain != (Capabilities{}) {
		t.Fatalf("a plain request needs %+v", plain)
	}
	if err := CheckCapabilities(Capabilities{OutputSchema: true}, n); !errors.Is(err, ErrUnsupportedCapability) {
		t.Fatal(err)
	}
}

// The Delegator adapter turns a nested spawn into a routed delegation that
// carries its tree's lineage: the hops, and the mesh depth of the child.
func TestDelegatorCarriesLineage(t *testing.T) {
	r := &Router{}
	peer := &stub{name: "peer:b", caps: Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}}
	r.Register(peer)
	lin := &Lineages{}
	hops := []string{"x", "self"}
	lin.Set("run-1", Lineage{Hops: hops, Depth: 1, MaxDepth: 4})
	hops[0] = "mutated"
	d := Delegator{Router: r, Lineages: lin}
	payload := api.SpawnPayload{Depth: 2, Contract: api.OutputContract{Objective: "nested"}, Telemetry: api.Telemetry{RunID: "run-1"}}
	remote, err := d.Delegate(context.Background(), "peer:b", "child-1", payload)
	if err != nil {
		t.Fatal(err)
	}
	<-remote.Done()
	if res := remote.Result(); res.Status != api.StatusCompleted || res.Usage.TokensIn != 2 {
		t.Fatalf("result %+v", res)
	}
	got := peer.reqs[0]
	if got.Handle != "child-1" || got.Provider != "peer:b" || got.Depth != 3 || got.MaxDepth != 4 || len(got.Hops) != 2 || got.Hops[0] != "x" {
		t.Fatalf("request %+v", got)
	}
	if _, err := d.Delegate(context.Background(), LocalName, "c", payload); !errors.Is(err, ErrLocalViaDelegator) {
		t.Fatalf("local through the delegator: %v", err)
	}
	if _, err := d.Delegate(context.Background(), "peer:nope", "c", payload); !errors.Is(err, ErrUnknownProvider) {
		t.Fatalf("unknown provider: %v", err)
	}
	lin.Delete("run-1")
	if lin.Get("run-1").Hops != nil {
		t.Fatal("lineage not deleted")
	}
	// Without lineages every tree is a root with no hops.
	if _, err := (Delegator{Router: r}).Delegate(context.Background(), "peer:b", "c2", payload); err != nil {
		t.Fatal(err)
	}
}

func TestParseRule(t *testing.T) {
	r, err := ParseRule("research=peer:b")
	if err != nil || r != (Rule{Skill: "research", Provider: "peer:b"}) {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := ParseRule("*=local"); err != nil || r.Skill != AnySkill {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"", "x", "=peer:b", "x=", "a b=local", "x=peer:b,y=local", "a=b=c"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseRule: never a panic, an accepted rule has both halves.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"research=peer:b", "*=local", "=", "a=b=c", " x = y "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err == nil && (r.Skill == "" || r.Provider == "") {
			t.Fatalf("accepted %q as %+v", s, r)
		}
	})
}

// The local provider's tree cap: the mesh cap, lowered by a depth limit.
func TestMeshMaxDepth(t *testing.T) {
	for _, c := range []struct {
		depth, max, limit, want int
	}{
		{0, 0, 0, 0},
		{0, 4, 0, 4},
		{2, 4, 0, 4},
		{2, 4, 1, 3},
		{2, 4, 5, 4},
		{1, 0, 2, 3},
	} {
		if got := MeshMaxDepth(c.depth, c.max, c.limit); got != c.want {
			t.Errorf("depth %d, max %d, limit %d: %d, want %d", c.depth, c.max, c.limit, got, c.want)
		}
	}
}
