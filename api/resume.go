package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
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

// WaitingTreeVersion is the version of the WaitingTree encoding.
const WaitingTreeVersion = 1

// WaitingTree is what a tree waiting for its root's answer needs to go on
// in another process: the question, and each waiting subagent (the asker
// and each one passing its question up) and each ended one (its result),
// parents before their children.
// It is stored with the task while its question waits (the task store),
// and a tree started from it (supervisor StartRequest.Resume) re-creates
// those subagents under the same handles and agent paths, each from its
// conversation with the answer as its pending call's result.
type WaitingTree struct {
	Version  int           `json:"version"`
	Question Question      `json:"question"`
	Nodes    []WaitingNode `json:"nodes"`
	// At is when the record was taken: a deadline charged with the wait
	// (--input-charges-deadline) runs on from it.
	At time.Time `json:"at"`
}

// WaitingNode is one waiting subagent of a WaitingTree.
type WaitingNode struct {
	Handle       string       `json:"handle"`
	ParentHandle string       `json:"parent_handle,omitempty"` // empty for the root
	Disposition  Disposition  `json:"disposition,omitempty"`   // how its parent spawned it
	Payload      SpawnPayload `json:"payload"`                 // as it was spawned (its agent path and depth within)
	Conversation Conversation `json:"conversation"`            // its loop's state, waiting on its subagent.ask call
	// Spawned is how many children it had admitted (the ended ones
	// included), so a child it spawns after the answer gets the next path.
	Spawned int `json:"spawned,omitempty"`
	// Remaining is the time its deadline had left when the record was
	// taken (the wait itself does not count, unless charged).
	Remaining Duration `json:"remaining"`
	// Ended, set for a child that had ended (its parent's await and
	// status answer with it), is its result as its node kept it; such a
	// node has no conversation and no time left, and is restored ended,
	// with no process.
	Ended *SubagentResult `json:"ended,omitempty"`
	// Remote, set for a remote child (a delegation to an A2A peer) that
	// waits on its peer's question, is that question's remote task: such a
	// node has no conversation and no children here; it is restored as a
	// remote child that sends the answer to that task and follows it on.
	Remote *WaitingRemote `json:"remote,omitempty"`
}

// WaitingRemote is the peer's task a remote child of a WaitingTree waits
// on: what its delegation needs to send the answer to it (the same message,
// with the same messageId, the live delegation would have sent) and follow
// it on.
type WaitingRemote struct {
	Peer      string `json:"peer"`                 // the provider the child was delegated to
	TaskID    string `json:"task_id"`              // the peer's task
	ContextID string `json:"context_id,omitempty"` // its context
	Number    int    `json:"number"`               // the question's number in the delegation, from 1
	Key       string `json:"key"`                  // the question's key (its state and status message)
}

// ErrBadWaitingTree refuses a stored waiting tree that cannot be resumed.
var ErrBadWaitingTree = errors.New("api: bad waiting tree")

// DecodeWaitingTree decodes and checks a stored waiting tree.
func DecodeWaitingTree(b []byte) (*WaitingTree, error) {
	var w WaitingTree
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadWaitingTree, err)
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return &w, nil
}

// Validate checks the version, a root first and waiting, every other
// node's parent before it, unique handles, each payload, each waiting
// node's conversation (a remote child's peer task instead) and time left,
// no waiting node under an ended one, and no node under a remote child.
func (w *WaitingTree) Validate() error {
	if w.Version != WaitingTreeVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrBadWaitingTree, w.Version, WaitingTreeVersion)
	}
	if len(w.Nodes) == 0 || w.Nodes[0].ParentHandle != "" || w.Nodes[0].Ended != nil {
		return fmt.Errorf("%w: no waiting root first", ErrBadWaitingTree)
	}
	ended := make(map[string]bool, len(w.Nodes)) // seen: handle to whether it had ended
	remote := make(map[string]bool)              // handles of remote children
	for i := range w.Nodes {
		n := &w.Nodes[i]
		parentEnded, parentSeen := ended[n.ParentHandle]
		_, dup := ended[n.Handle]
		switch {
		case n.Handle == "" || dup:
			return fmt.Errorf("%w: node %d: a missing or repeated handle %q", ErrBadWaitingTree, i, n.Handle)
		case i > 0 && !parentSeen:
			return fmt.Errorf("%w: node %s: its parent %q is not before it", ErrBadWaitingTree, n.Handle, n.ParentHandle)
		case n.Ended == nil && parentEnded:
			return fmt.Errorf("%w: node %s: waiting under its parent %q, which had ended", ErrBadWaitingTree, n.Handle, n.ParentHandle)
		case n.Ended == nil && n.Remaining <= 0:
			return fmt.Errorf("%w: node %s: no time left", ErrBadWaitingTree, n.Handle)
		case remote[n.ParentHandle]:
			return fmt.Errorf("%w: node %s: under the remote child %q, which has no children here", ErrBadWaitingTree, n.Handle, n.ParentHandle)
		}
		ended[n.Handle] = n.Ended != nil
		if n.Remote != nil {
			if err := n.Remote.validate(i, n); err != nil {
				return err
			}
			remote[n.Handle] = true
		}
		if err := n.Payload.Validate(); err != nil {
			return fmt.Errorf("%w: node %s: %v", ErrBadWaitingTree, n.Handle, err)
		}
		if n.Remote != nil {
			continue // waiting on its peer's task: no conversation here
		}
		if n.Ended != nil {
			if !n.Ended.Status.Valid() {
				return fmt.Errorf("%w: node %s: ended with status %q", ErrBadWaitingTree, n.Handle, n.Ended.Status)
			}
			continue
		}
		if err := n.Conversation.Validate(); err != nil {
			return fmt.Errorf("%w: node %s: %v", ErrBadWaitingTree, n.Handle, err)
		}
	}
	return nil
}

// validate checks a remote child's record: not the root, not ended, a peer,
// a task, a question number and key.
func (r *WaitingRemote) validate(i int, n *WaitingNode) error {
	switch {
	case i == 0:
		return fmt.Errorf("%w: the root is a remote child", ErrBadWaitingTree)
	case n.Ended != nil:
		return fmt.Errorf("%w: node %s: both ended and waiting on its peer", ErrBadWaitingTree, n.Handle)
	case r.Peer == "" || r.TaskID == "" || r.Key == "":
		return fmt.Errorf("%w: node %s: a remote wait without its peer, task or question key", ErrBadWaitingTree, n.Handle)
	case r.Number < 1:
		return fmt.Errorf("%w: node %s: remote question number %d, want at least 1", ErrBadWaitingTree, n.Handle, r.Number)
	}
	return nil
}
