package api

import (
	"encoding/json"
	"errors"
	"fmt"
)

// A subagent that waits in subagent.ask costs a process while a person
// thinks. Its loop's state at that moment is small and complete: the
// conversation (whose last assistant message holds the pending
// subagent_ask call), the step count and the tokens used. The child sends
// it with the call (ToolCall.Conversation), the supervisor keeps it, and a
// suspended subagent is started again from it (SpawnPayload.Resume): its
// loop appends the answer as the pending call's result and goes on with its
// next step, never re-sending its first prompt.

// Roles of a ConversationMessage.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ConversationMessage is one turn of a subagent's conversation, as its loop
// keeps it (the system prompt is not a turn: it is rebuilt from the payload).
type ConversationMessage struct {
	Role       string                 `json:"role"`
	Content    string                 `json:"content,omitempty"`
	ToolCalls  []ConversationToolCall `json:"tool_calls,omitempty"`
	ToolCallID string                 `json:"tool_call_id,omitempty"`
}

// ConversationToolCall is a model's tool call in an assistant turn.
type ConversationToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Conversation is a waiting subagent's loop state: its turns so far (the
// assistant turn whose call CallID waits is among them, and the results of
// that turn's earlier calls follow it), the pending call, and the usage so
// far.
type Conversation struct {
	Messages []ConversationMessage `json:"messages"`
	CallID   string                `json:"call_id"`
	Usage    Usage                 `json:"usage"`
}

// Resume is a child started from a stored conversation: the Conversation
// and the answer to its pending call, which the loop adds as that call's
// result before its next step.
type Resume struct {
	Conversation
	Answer  string `json:"answer"`
	IsError bool   `json:"is_error,omitempty"` // the answer is an error result (no answer came)
}

// MaxConversationMessages bounds a stored conversation's turns.
const MaxConversationMessages = 100_000

// ErrBadConversation refuses a conversation that cannot be resumed.
var ErrBadConversation = errors.New("api: bad conversation")

// PendingTurn returns the index of the assistant turn holding the pending
// call, and the call's index in it.
func (c *Conversation) PendingTurn() (turn, call int, err error) {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		m := c.Messages[i]
		if m.Role != RoleAssistant {
			continue
		}
		for j, tc := range m.ToolCalls {
			if tc.ID == c.CallID {
				return i, j, nil
			}
		}
		break // only the latest assistant turn can hold a pending call
	}
	return 0, 0, fmt.Errorf("%w: the latest assistant turn holds no call %q", ErrBadConversation, c.CallID)
}

// Validate checks that the conversation can be resumed: turns of known
// roles, within MaxConversationMessages, a call id, the pending call in the
// latest assistant turn and followed only by results of that turn's
// earlier calls, and no negative usage.
func (c *Conversation) Validate() error {
	switch {
	case len(c.Messages) == 0:
		return fmt.Errorf("%w: no turns", ErrBadConversation)
	case len(c.Messages) > MaxConversationMessages:
		return fmt.Errorf("%w: %d turns, over the limit of %d", ErrBadConversation, len(c.Messages), MaxConversationMessages)
	case c.CallID == "":
		return fmt.Errorf("%w: no pending call id", ErrBadConversation)
	case c.Usage.TokensIn < 0 || c.Usage.TokensOut < 0 || c.Usage.Steps < 0:
		return fmt.Errorf("%w: negative usage", ErrBadConversation)
	}
	for i, m := range c.Messages {
		switch m.Role {
		case RoleUser, RoleAssistant, RoleTool:
		default:
			return fmt.Errorf("%w: turn %d has role %q", ErrBadConversation, i, m.Role)
		}
	}
	turn, call, err := c.PendingTurn()
	if err != nil {
		return err
	}
	after := c.Messages[turn+1:]
	if len(after) > call {
		return fmt.Errorf("%w: %d turns after the pending call's turn, want at most %d (its earlier calls' results)", ErrBadConversation, len(after), call)
	}
	for _, m := range after {
		if m.Role != RoleTool {
			return fmt.Errorf("%w: a %s turn after the pending call's turn", ErrBadConversation, m.Role)
		}
	}
	return nil
}

// Validate checks the conversation and the answer's size (MaxAnswer).
func (r *Resume) Validate() error {
	if err := r.Conversation.Validate(); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if len(r.Answer) > MaxAnswer {
		return fmt.Errorf("resume: the answer is %d bytes, over the limit of %d", len(r.Answer), MaxAnswer)
	}
	return nil
}
