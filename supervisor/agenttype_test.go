package supervisor

import (
	"testing"

	"github.com/agentd/agentd/api"
)

// TestSpawnAgentTypeOnlyNarrows: a spawn naming a declared agent type gets
// its system prompt and its narrower tools and limits, but a type that
// declares more than the parent holds (every tool of a server, exec, more
// steps and tokens, a peer the parent may not use) widens nothing; an
// undeclared type, a peer outside the parent's type and a self-tool outside
// the type's are refused.
func TestSpawnAgentTypeOnlyNarrows(t *testing.T) {
	yes := true
	types := map[string]*api.AgentType{
		"wide": {Name: "wide", SystemPrompt: "wide prompt", MCP: []string{"t/*"}, Exec: &yes, Peers: []string{"peer:x", "peer:y"},
			Limits: api.Limits{MaxSteps: 1000, MaxTokens: 1 << 40, MaxChildren: 100}},
		"narrow": {Name: "narrow", SystemPrompt: "narrow prompt", MCP: []string{"t/a"}, SelfTools: []string{api.ToolStatus}, Limits: api.Limits{MaxSteps: 3, MaxTokens: 500}},
	}
	s, _ := newNestingSupervisor(t, func(c *Config) {
		c.Tools = map[string]ToolServer{"t": toolBox{}}
		c.ToolTags = func(r api.ToolRef) (api.ToolTags, bool) { return api.ToolTags{}, true }
		c.Delegator = &fakeDelegator{}
		c.AgentTypes = func(name string) (*api.AgentType, bool) { t, ok := types[name]; return t, ok }
	})
	ta, tb := api.ToolRef{Server: "t", Tool: "a"}, api.ToolRef{Server: "t", Tool: "b"}
	typed := func(name string, refs ...api.ToolRef) func(*api.SpawnArgs) {
		return func(a *api.SpawnArgs) { a.AgentType, a.Scope.Allow = name, refs }
	}
	// The wide child tries to reach peer:y, which its parent's role lacks.
	wideChild := prog{Calls: []progCall{spawnCall(prog{}, api.DispositionSync, func(a *api.SpawnArgs) { a.Provider = "peer:y" })}}
	_, res := runProg(t, s, prog{Calls: []progCall{
		spawnCall(wideChild, api.DispositionSync, typed("wide", ta)),
		spawnCall(prog{Calls: []progCall{spawnCall(prog{}, api.DispositionSync)}}, api.DispositionSync, typed("narrow", ta, tb)),
		spawnCall(prog{}, api.DispositionSync, typed("nonesuch")),
	}}, func(p *api.SpawnPayload) {
		p.Scope.Allow = []api.ToolRef{ta, tb}
		p.Limits.MaxSteps, p.Limits.MaxTokens = 20, 10000
		p.Agent = &api.AgentRole{Type: "root", Peers: []string{"peer:x"}}
	})
	root := report(t, res)
	wide := report(t, api.SubagentResult{Distillate: *childReportOf(t, root.Results[0]).Distillate})
	if len(wide.Scope) != 1 || wide.Scope[0] != ta || wide.Limits.MaxSteps != 20 || wide.Limits.MaxTokens > 10000 || wide.Limits.MaxChildren > 100 {
		t.Errorf("the wide type widened the grant: scope %v limits %+v", wide.Scope, wide.Limits)
	}
	if wide.Agent == nil || wide.Agent.Type != "wide" || wide.Agent.SystemPrompt != "wide prompt" || len(wide.Agent.Peers) != 1 || wide.Agent.Peers[0] != "peer:x" {
		t.Errorf("wide role: %+v", wide.Agent)
	}
	if r := wide.Results[0]; !r.IsError || r.Text != `spawn denied: the agent type may not use provider "peer:y"` {
		t.Errorf("a spawn to a peer the type lacks: %+v", r)
	}
	narrow := report(t, api.SubagentResult{Distillate: *childReportOf(t, root.Results[1]).Distillate})
	if len(narrow.Scope) != 1 || narrow.Scope[0] != ta || narrow.Limits.MaxSteps != 3 || narrow.Limits.MaxTokens != 500 {
		t.Errorf("the narrow type did not narrow: scope %v limits %+v", narrow.Scope, narrow.Limits)
	}
	if narrow.Agent == nil || narrow.Agent.SystemPrompt != "narrow prompt" || len(narrow.Agent.Peers) != 1 {
		t.Errorf("narrow role (peers inherited from the parent's): %+v", narrow.Agent)
	}
	if r := narrow.Results[0]; !r.IsError || r.Text != `tool "subagent.spawn" is not one of this subagent's agent type's self-tools` {
		t.Errorf("a self-tool the type does not list: %+v", r)
	}
	if r := root.Results[2]; !r.IsError || r.Text != `spawn denied: unknown agent type "nonesuch"` {
		t.Errorf("an undeclared type: %+v", r)
	}
}
