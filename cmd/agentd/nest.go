package main

import (
	"errors"
	"strings"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// nestFlags are the subagent.spawn chokepoint's caps beyond --max-depth and
// --max-children, and the Rule-of-Two override.
type nestFlags struct {
	maxTotal      *int
	maxInflight   *int
	spawnBurst    *int
	spawnRate     *float64
	treeCeiling   *int64
	allowTrifecta *bool
}

func addNestFlags(f *flags) nestFlags {
	d := supervisor.DefaultCaps
	return nestFlags{
		maxTotal:      f.int("max-total-subagents", "AGENT_MAX_TOTAL_SUBAGENTS", d.MaxTotalSubagents, "subagents one tree may ever create, its root included"),
		maxInflight:   f.int("max-inflight", "AGENT_MAX_INFLIGHT", d.MaxInflight, "unfinished async children per parent"),
		spawnBurst:    f.int("spawn-burst", "AGENT_SPAWN_BURST", d.SpawnBurst, "spawn-rate token bucket: burst of spawns per tree"),
		spawnRate:     f.float64("spawn-rate", "AGENT_SPAWN_RATE", d.SpawnRate, "spawn-rate token bucket: spawns per second per tree"),
		treeCeiling:   f.int64("tree-token-ceiling", "AGENT_TREE_TOKEN_CEILING", d.TreeTokenCeiling, "tokens one tree may use; past it the tree drains (exit 7 in one-shot)"),
		allowTrifecta: f.bool("allow-trifecta", "AGENT_ALLOW_TRIFECTA", false, "let the root grant hold all three Rule-of-Two legs (untrusted_input, sensitive, egress); never passed to children"),
	}
}

// caps are the chokepoint caps the flags set.
func (c *core) caps() supervisor.Caps {
	return supervisor.Caps{
		MaxDepth:          *c.maxDepth,
		MaxChildren:       *c.maxChildren,
		MaxTotalSubagents: *c.nest.maxTotal,
		MaxInflight:       *c.nest.maxInflight,
		SpawnBurst:        *c.nest.spawnBurst,
		SpawnRate:         *c.nest.spawnRate,
		TreeTokenCeiling:  *c.nest.treeCeiling,
	}
}

// validate checks the caps, naming the flag of a bad one, and runs the
// Rule-of-Two gate over the root grant (grant and its tagger).
func (n nestFlags) validate(caps supervisor.Caps, grant []api.ToolRef, tags supervisor.ToolTagger) error {
	if err := caps.Validate(); err != nil {
		var ce *supervisor.CapError
		if errors.As(err, &ce) {
			return usageError("--%s %v: must be positive and at most %v", strings.ReplaceAll(ce.Name, "_", "-"), ce.Value, ce.Bound)
		}
		return usageError("%v", err)
	}
	return checkRuleOfTwo(grant, tags, *n.allowTrifecta)
}

// rootScope is the root grant as a payload scope (the supervisor computes its
// Rule-of-Two legs).
func (c *core) rootScope() api.ToolScope { return api.ToolScope{Allow: c.rootGrant()} }

// checkRuleOfTwo is the startup gate: a root grant whose tools together hold
// untrusted_input, sensitive and egress is bad config unless --allow-trifecta.
// An untagged tool counts as untrusted_input.
func checkRuleOfTwo(grant []api.ToolRef, tags supervisor.ToolTagger, allow bool) error {
	if err := supervisor.CheckRootGrant(supervisor.ScopeTags(grant, tags), allow); err != nil {
		return usageError("the root tool grant holds untrusted_input, sensitive and egress at once (Rule of Two); narrow the tools or pass --allow-trifecta")
	}
	return nil
}
