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
		api.ToolAsk:    s.toolAsk,
		api.ToolAnswer: s.toolAnswer,
		api.ToolSteer:  s.toolSteer,

		api.ToolResourceRead: s.toolResourceRead,
		api.ToolResourceWait: s.toolResourceWait,
		api.ToolExec:         s.toolExec,
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

// decodeHandle decodes a self-tool's arguments ({"handle", "timeout_ms"?}:
// api.AwaitArgs, of which api.HandleArgs is the part status and cancel read)
// and finds the handle below caller. A failure is the tool result to answer.
func decodeHandle(tool string, caller *node, raw json.RawMessage) (*node, api.AwaitArgs, *api.ToolResult) {
	var a api.AwaitArgs
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil {
		r := api.TextResult(tool+": bad arguments: want {\"handle\": \"...\"}", true)
		return nil, a, &r
	}
	c, ok := descendant(caller, a.Handle)
	if !ok {
		r := api.TextResult(fmt.Sprintf("%s: no subagent with handle %q below this one", tool, a.Handle), true)
		return nil, a, &r
	}
	return c, a, nil
}

// toolStatus serves subagent.status: a child's report, with its result once it
// has finished.
func (s *Supervisor) toolStatus(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	c, _, bad := decodeHandle(api.ToolStatus, caller, raw)
	if bad != nil {
		return *bad
	}
	return childReport(c).ToolResult()
}

// toolAwait serves subagent.await: it waits for a child to finish, at most
// timeout_ms (default and maximum api.MaxAwait), and answers with its report.
func (s *Supervisor) toolAwait(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	c, a, bad := decodeHandle(api.ToolAwait, caller, raw)
	if bad != nil {
		return *bad
	}
	waitEnded(ctx, c, api.WaitFor(a.TimeoutMS))
	return childReport(c).ToolResult()
}

// waitEnded waits until c has ended or asks a question, d passes or ctx
// ends.
func waitEnded(ctx context.Context, c *node, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	_, asked := c.asking()
	select {
	case <-asked:
	case <-c.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// toolCancel serves subagent.cancel: the kill ladder on a child's subtree.
func (s *Supervisor) toolCancel(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	c, _, bad := decodeHandle(api.ToolCancel, caller, raw)
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
