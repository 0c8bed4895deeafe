package supervisor

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// TestSetKeyEnv: children start with Config.KeyEnv; after SetKeyEnv a new
// child gets the new keys, and the warm child started with the old ones is
// retired (reaped), not handed out. Equal keys change nothing.
func TestSetKeyEnv(t *testing.T) {
	const name = api.EnvIntelligenceKey + "_T"
	s, _ := newNestingSupervisor(t, withPool(1), func(c *Config) { c.KeyEnv = []string{name + "=old"} })
	keysOf := func() []string {
		t.Helper()
		_, res := runProg(t, s, prog{})
		return report(t, res).Keys
	}
	waitIdle(t, s, 1)
	if got := keysOf(); !slices.Equal(got, []string{name + "=old"}) {
		t.Fatalf("keys at start: %v", got)
	}
	stale := waitIdle(t, s, 1) // started with the old keys
	s.SetKeyEnv([]string{name + "=new"})
	if got := keysOf(); !slices.Equal(got, []string{name + "=new"}) {
		t.Fatalf("keys after SetKeyEnv: %v (a warm child started before it was handed out)", got)
	}
	groupsGone(t, stale)
	if st := s.Pool(); st.Assigned != 1 {
		t.Errorf("pool %+v: want the first run alone on a warm child", st)
	}
	env := s.env.Load()
	s.SetKeyEnv([]string{name + "=new"})
	if s.env.Load() != env {
		t.Error("equal keys made a new environment")
	}
}

// TestTypedChildGetsItsEndpointsBreakers: a spawn naming an agent type with
// an intelligence of its own is handed the service-wide breaker state of
// that intelligence's endpoints, not of its parent's.
func TestTypedChildGetsItsEndpointsBreakers(t *testing.T) {
	a := api.Intelligence{Endpoint: "http://a.invalid/v1", Model: "ma"}
	b := api.Intelligence{Endpoint: "http://b.invalid/v1", Model: "mb"}
	types := map[string]*api.AgentType{"b": {Name: "b", Intelligence: &b}}
	s, _ := newNestingSupervisor(t, func(c *Config) {
		c.AgentTypes = func(name string) (*api.AgentType, bool) { t, ok := types[name]; return t, ok }
	})
	now := time.Now()
	for _, e := range []api.Intelligence{a, b} {
		s.intel.note(e, api.IntelligenceReport{Endpoint: e.Endpoint, Model: e.Model, Breaker: &api.EndpointBreaker{
			Endpoint: e.Endpoint, Model: e.Model, State: api.BreakerOpen, Since: now, Until: now.Add(time.Hour),
		}}, slog.New(slog.DiscardHandler))
	}
	_, res := runProg(t, s, prog{Calls: []progCall{spawnCall(prog{}, api.DispositionSync, func(x *api.SpawnArgs) { x.AgentType = "b" })}},
		func(p *api.SpawnPayload) { p.Intelligence = a })
	root := report(t, res)
	if len(root.Breakers) != 1 || root.Breakers[0].Endpoint != a.Endpoint {
		t.Errorf("the root on a was handed %+v", root.Breakers)
	}
	child := report(t, api.SubagentResult{Distillate: *childReportOf(t, root.Results[0]).Distillate})
	if child.Endpoint != b.Endpoint || len(child.Breakers) != 1 || child.Breakers[0].Endpoint != b.Endpoint {
		t.Errorf("the typed child on %s was handed %+v, want b's breaker", child.Endpoint, child.Breakers)
	}
}
