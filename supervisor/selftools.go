package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentd/agentd/api"
)

// selfToolTable is the self-tools the supervisor serves to every subagent,
// outside any scope.
func (s *Supervisor) selfToolTable() map[string]selfTool {
	return map[string]selfTool{
		api.ToolSpawn:  s.toolSpawn,
		api.ToolStatus: s.toolStatus,
		api.ToolAwait:  s.toolAwait,
		api.ToolCancel: s.toolCancel,
	}
}

// descendant returns the node with this handle if it is in caller's subtree
// (below caller, finished or not). A handle from anywhere else, another tree
// included, is unknown to the caller.
func descendant(caller *node, handle string) (*node, bool) {
	t := caller.nest.tree
	t.mu.Lock()
	c := t.nodes[handle]
	t.mu.Unlock()
	if c == nil {
		return nil, false
	}
	for p := c.parent; p != nil; p = p.parent {
		if p == caller {
			return c, true
		}
	}
	return nil, false
}

func decodeHandle(tool string, caller *node, raw json.RawMessage, v any, handle func() string) (*node, *api.ToolResult) {
	if len(raw) == 0 || json.Unmarshal(raw, v) != nil {
		r := api.TextResult(tool+": bad arguments: want {\"handle\": \"...\"}", true)
		return nil, &r
	}
	c, ok := descendant(caller, handle())
	if !ok {
		r := api.TextResult(fmt.Sprintf("%s: no subagent with handle %q below this one", tool, handle()), true)
		return nil, &r
	}
	return c, nil
}

// toolStatus serves subagent.status: a child's report, with its result once it
// has finished.
func (s *Supervisor) toolStatus(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	var a api.HandleArgs
	c, bad := decodeHandle(api.ToolStatus, caller, raw, &a, func() string { return a.Handle })
	if bad != nil {
		return *bad
	}
	return childReport(c).ToolResult()
}

// toolAwait serves subagent.await: it waits for a child to finish, at most
// timeout_ms (default and maximum api.MaxAwait), and answers with its report.
func (s *Supervisor) toolAwait(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	var a api.AwaitArgs
	c, bad := decodeHandle(api.ToolAwait, caller, raw, &a, func() string { return a.Handle })
	if bad != nil {
		return *bad
	}
	wait := api.MaxAwait
	if a.TimeoutMS > 0 && time.Duration(a.TimeoutMS)*time.Millisecond < wait {
		wait = time.Duration(a.TimeoutMS) * time.Millisecond
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	case <-ctx.Done():
	}
	return childReport(c).ToolResult()
}

// toolCancel serves subagent.cancel: the kill ladder on a child's subtree.
func (s *Supervisor) toolCancel(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	var a api.HandleArgs
	c, bad := decodeHandle(api.ToolCancel, caller, raw, &a, func() string { return a.Handle })
	if bad != nil {
		return *bad
	}
	r := childReport(c)
	cancelled := false
	if !c.ended() {
		for _, m := range c.subtree() {
			if !m.ended() {
				r.SubtreeSize++
			}
		}
		s.killSubtree(c, verdict{status: api.StatusCancelled, detail: "cancelled by its parent (subagent.cancel)"}, "subagent.cancel")
		cancelled = true
	}
	r.Cancelled = &cancelled
	return r.ToolResult()
}
