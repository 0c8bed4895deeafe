package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// A subagent waiting in subagent.ask can be ended and started again from
// its conversation (api/resume.go): its subagent.ask call carries the
// loop's state (ConversationCaller), and a payload with a Resume starts
// the loop from that state with the answer as the pending call's result.

// ConversationCaller is a ToolCaller that can carry the loop's conversation
// with a call: the loop uses it for subagent.ask, so the supervisor holds
// what it needs to end the waiting process and start it again.
type ConversationCaller interface {
	CallToolWith(ctx context.Context, name string, args json.RawMessage, conv *api.Conversation) (api.ToolResult, error)
}

// conversation is the run's state as it waits on the call callID.
func (r *run) conversation(callID string) *api.Conversation {
	msgs := make([]api.ConversationMessage, len(r.req.Messages))
	for i, m := range r.req.Messages {
		cm := api.ConversationMessage{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, api.ConversationToolCall{ID: tc.ID, Name: tc.Name, Args: tc.Args})
		}
		msgs[i] = cm
	}
	return &api.Conversation{Messages: msgs, CallID: callID, Usage: r.usage}
}

// resume starts the run from res: its turns, the answer as the pending
// call's result, its usage; the pending turn's later calls are left in
// r.rest, and its text is the partial distillate so far.
func (r *run) resume(res *api.Resume) error {
	if err := res.Validate(); err != nil {
		return fmt.Errorf("resume the conversation: %w", err)
	}
	turn, call, _ := res.PendingTurn()
	msgs := make([]intelligence.Message, 0, len(res.Messages)+1)
	for _, m := range res.Messages {
		im := intelligence.Message{Role: intelligence.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			im.ToolCalls = append(im.ToolCalls, intelligence.ToolCall{ID: tc.ID, Name: tc.Name, Args: tc.Args})
		}
		msgs = append(msgs, im)
		if m.Role == api.RoleAssistant && m.Content != "" {
			r.last = m.Content
		}
	}
	msgs = append(msgs, intelligence.Message{Role: intelligence.RoleTool, ToolCallID: res.CallID,
		Content: toolText(api.TextResult(res.Answer, res.IsError))})
	r.req.Messages = msgs
	r.usage = res.Usage
	r.rest = msgs[turn].ToolCalls[call+1:]
	r.l.Log.Info("resumed from a stored conversation", "turns", len(res.Messages), "steps", res.Usage.Steps, "later_calls", len(r.rest))
	return nil
}
