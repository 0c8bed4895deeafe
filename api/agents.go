package api

import (
	"slices"
	"strings"
)

// AgentRole is the declared agent type a subagent runs as (an agentd
// addition; docs/intelligence.md, "Declared agents"): its name, its system
// prompt, and the peers its own spawns may be delegated to. A payload
// without one runs as the flags configure.
type AgentRole struct {
	Type         string `json:"type"`
	SystemPrompt string `json:"system_prompt,omitempty"`
	// Peers, when not nil, are the only providers (peer:NAME) a spawn of this
	// subagent may name; an empty list allows only local children. Nil
	// allows any the router has.
	Peers []string `json:"peers"`
	// SelfTools, when not nil, are the only self-tools (subagent.spawn,
	// subagent.status, subagent.await, subagent.cancel, resource.read,
	// resource.wait) the subagent is offered and may call; nil allows them
	// all. The exec self-tool is the scope's (ExecRef).
	SelfTools []string `json:"self_tools,omitempty"`
}

// AllowsSelfTool reports whether a subagent in this role may call the
// self-tool name; a nil role allows every one, and the exec self-tool is
// left to the scope.
func (r *AgentRole) AllowsSelfTool(name string) bool {
	return r == nil || r.SelfTools == nil || name == ToolExec || slices.Contains(r.SelfTools, name)
}

// AllowsProvider reports whether a spawn of a subagent in this role may name
// provider (a peer); a nil role allows every provider.
func (r *AgentRole) AllowsProvider(provider string) bool {
	return r == nil || r.Peers == nil || slices.Contains(r.Peers, provider)
}

// AgentType is a declared agent type, resolved from the agents file: what a
// root or a child of that type runs with. Apply narrows a payload to it; a
// type never widens what the payload already holds.
type AgentType struct {
	Name         string
	SystemPrompt string
	// Intelligence, when set, is the model the type runs on; nil keeps the
	// payload's.
	Intelligence *Intelligence
	// MCP, when not nil, are the only MCP tools the type keeps: SERVER/TOOL
	// or SERVER/* patterns. Nil keeps every tool of the grant.
	MCP []string
	// Exec, when set to false, drops the exec self-tool from the grant; true
	// keeps it when the grant holds it (never adds it).
	Exec *bool
	// Peers, when not nil, are the only providers its spawns may name.
	Peers []string
	// SelfTools, when not nil, are the only self-tools it is offered.
	SelfTools []string
	// Limits are upper bounds: every positive field lowers the payload's.
	Limits Limits
	// MaxDepth, when positive, is how many levels a root of this type may
	// nest below itself.
	MaxDepth int
}

// Apply narrows p to the type: the role (with the peers intersected with
// those of the role p already had, so a child never gains a peer its parent
// lacked), the intelligence, the tool scope (patterns and exec) and the
// limits, each only lowered.
func (t *AgentType) Apply(p *SpawnPayload, parent *AgentRole) {
	role := &AgentRole{Type: t.Name, SystemPrompt: t.SystemPrompt, Peers: t.Peers, SelfTools: t.SelfTools}
	if parent != nil {
		role.Peers = intersect(role.Peers, parent.Peers)
		role.SelfTools = intersect(role.SelfTools, parent.SelfTools)
	}
	p.Agent = role
	if t.Intelligence != nil {
		p.Intelligence = *t.Intelligence
	}
	var allow []ToolRef
	for _, ref := range p.Scope.Allow {
		if ref == ExecRef {
			if t.Exec == nil || *t.Exec {
				allow = append(allow, ref)
			}
			continue
		}
		if t.MCP == nil || matchTool(t.MCP, ref) {
			allow = append(allow, ref)
		}
	}
	p.Scope.Allow = allow
	p.Limits = lowerLimits(p.Limits, t.Limits)
}

// intersect returns the names in both lists, where a nil list is every name:
// nil only when both are.
func intersect(a, b []string) []string {
	switch {
	case b == nil:
		return slices.Clone(a)
	case a == nil:
		return slices.Clone(b)
	}
	kept := []string{}
	for _, s := range a {
		if slices.Contains(b, s) {
			kept = append(kept, s)
		}
	}
	return kept
}

// matchTool reports whether ref matches one of the SERVER/TOOL or SERVER/*
// patterns.
func matchTool(patterns []string, ref ToolRef) bool {
	for _, pat := range patterns {
		server, tool, _ := strings.Cut(pat, "/")
		if server == ref.Server && (tool == "*" || tool == ref.Tool) {
			return true
		}
	}
	return false
}

// lowerLimits returns l with every positive field of bound that is smaller
// taken instead (a zero field of l counts as unbounded only for the agentd
// additions, whose zero means the default).
func lowerLimits(l, bound Limits) Limits {
	lower := func(v *int, b int) {
		if b > 0 && (*v <= 0 || b < *v) {
			*v = b
		}
	}
	lower(&l.MaxSteps, bound.MaxSteps)
	if bound.MaxTokens > 0 && (l.MaxTokens <= 0 || bound.MaxTokens < l.MaxTokens) {
		l.MaxTokens = bound.MaxTokens
	}
	if bound.Deadline > 0 && (l.Deadline <= 0 || bound.Deadline < l.Deadline) {
		l.Deadline = bound.Deadline
	}
	lower(&l.MaxChildren, bound.MaxChildren)
	if bound.MaxRepeats > 0 && bound.MaxRepeats < l.Repeats() {
		l.MaxRepeats = bound.MaxRepeats
	}
	if bound.DistillateBudget > 0 && bound.DistillateBudget < l.Budget() {
		l.DistillateBudget = bound.DistillateBudget
	}
	return l
}
