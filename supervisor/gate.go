package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentd/agentd/api"
)

// Approval gates: a tool call the operator marked (exec, named MCP tools,
// spawns on named peers) waits for a person's yes before it runs. The
// question goes straight to whoever started the tree (Run.Questions: the
// A2A task goes input-required with the call's tool and arguments), never
// to a parent's model; "yes" runs the call, anything else is an error result
// the model sees. A tree started without a question channel cannot be
// asked, and its gated calls are refused.

// Gates marks the tool calls that wait for a person's yes. The zero value
// gates nothing.
type Gates struct {
	Exec  bool          // subagent.exec
	Tools []api.ToolRef // MCP tools, SERVER/TOOL
	Peers []string      // spawns on these providers (peer:NAME)
}

// holds reports whether call waits for a yes.
func (g Gates) holds(call api.ToolCall) bool {
	switch {
	case call.Tool == api.ToolExec:
		return g.Exec
	case call.Tool == api.ToolSpawn:
		if len(g.Peers) == 0 {
			return false
		}
		var a struct {
			Provider string `json:"provider"`
		}
		return json.Unmarshal(call.Args, &a) == nil && slices.Contains(g.Peers, a.Provider)
	}
	ref, ok := api.ParseToolRef(call.Tool)
	return ok && slices.Contains(g.Tools, ref)
}

// grants reports whether n's grant holds call, so that a call refused anyway
// is refused without asking anyone (callTool and the self-tools refuse it).
func (s *Supervisor) grants(n *node, call api.ToolCall) bool {
	if _, self := s.selfTools[call.Tool]; self {
		return n.payload.Agent.AllowsSelfTool(call.Tool) &&
			(call.Tool != api.ToolExec || s.cfg.AllowExec && n.payload.Scope.Holds(api.ExecRef))
	}
	ref, ok := api.ParseToolRef(call.Tool)
	return ok && n.payload.Scope.Holds(ref)
}

// approve asks the tree's starter whether n may make call, and returns nil
// for a yes, else the error result to answer the call with.
func (s *Supervisor) approve(ctx context.Context, n *node, call api.ToolCall) *api.ToolResult {
	deny := func(why string) *api.ToolResult {
		r := api.TextResult(fmt.Sprintf("%s was not run: %s", call.Tool, why), true)
		return &r
	}
	t := n.nest.tree
	if t.questions == nil {
		return deny("it needs a person's approval, and no one can be asked for it")
	}
	args := call.Args
	if len(args) == 0 || !json.Valid(args) {
		args = json.RawMessage(`{}`)
	}
	q := newQuestion(api.Question{
		Text:    fmt.Sprintf("Subagent %s wants to call %s with %s. Approve? (yes or no)", n.payload.AgentPath, call.Tool, args),
		Choices: []string{"yes", "no"}, AgentPath: n.payload.AgentPath, Handle: n.handle,
		Tool: call.Tool, Arguments: args,
	})
	defer q.abandon()
	log := s.nodeLogger(n)
	log.Info("tool call waits for approval", "tool", call.Tool)
	select {
	case t.questions <- q:
	case <-ctx.Done():
		return deny("no approval: " + context.Cause(ctx).Error())
	}
	select {
	case a := <-q.reply:
		if strings.EqualFold(strings.TrimSpace(a), "yes") {
			log.Info("tool call approved", "tool", call.Tool)
			return nil
		}
		log.Info("tool call denied", "tool", call.Tool)
		return deny("the person asked did not approve it (answered " + fmt.Sprintf("%q", a) + ")")
	case <-ctx.Done():
		return deny("no approval: " + context.Cause(ctx).Error())
	}
}

// Add adds one gate: exec, tool:SERVER/TOOL or peer:NAME.
func (g *Gates) Add(s string) error {
	switch kind, name, _ := strings.Cut(s, ":"); {
	case s == "exec":
		g.Exec = true
	case kind == "tool":
		ref, ok := api.ParseToolRef(name)
		if !ok {
			return fmt.Errorf("%q: want tool:SERVER/TOOL", s)
		}
		g.Tools = append(g.Tools, ref)
	case kind == "peer" && name != "":
		g.Peers = append(g.Peers, s)
	default:
		return fmt.Errorf("%q: want exec, tool:SERVER/TOOL or peer:NAME", s)
	}
	return nil
}
