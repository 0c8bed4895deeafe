package api

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// waitingTreeWithRemote is a valid record: a root waiting on its question,
// and a remote child waiting on its peer's.
func waitingTreeWithRemote() WaitingTree {
	conv := Conversation{
		Messages: []ConversationMessage{{Role: RoleUser, Content: "go"}, {Role: RoleAssistant, ToolCalls: []ConversationToolCall{{ID: "c1", Name: "subagent_ask"}}}},
		CallID:   "c1",
	}
	return WaitingTree{Version: WaitingTreeVersion, Question: Question{Handle: "r", Text: "which?"}, Nodes: []WaitingNode{
		{Handle: "root", Payload: validPayload(), Conversation: conv, Remaining: Duration(time.Minute)},
		{Handle: "r", ParentHandle: "root", Payload: validPayload(), Remaining: Duration(time.Minute),
			Remote: &WaitingRemote{Peer: "peer:b", TaskID: "t1", ContextID: "c1", Number: 1, Key: "input-required|m1"}},
	}}
}

// A remote child's wait survives the record's encoding, and a record with a
// remote child that cannot be resumed (no task, no key, no question
// number, ended too, as the root, with children here) is refused by name.
func TestWaitingTreeRemoteChild(t *testing.T) {
	w := waitingTreeWithRemote()
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeWaitingTree(b)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Nodes[1].Remote; r == nil || *r != *w.Nodes[1].Remote {
		t.Fatalf("the remote child's wait after the round trip: %+v, want %+v", r, w.Nodes[1].Remote)
	}
	for name, mutate := range map[string]func(w *WaitingTree){
		"no task":      func(w *WaitingTree) { w.Nodes[1].Remote.TaskID = "" },
		"no peer":      func(w *WaitingTree) { w.Nodes[1].Remote.Peer = "" },
		"no key":       func(w *WaitingTree) { w.Nodes[1].Remote.Key = "" },
		"number 0":     func(w *WaitingTree) { w.Nodes[1].Remote.Number = 0 },
		"no time left": func(w *WaitingTree) { w.Nodes[1].Remaining = 0 },
		"ended too":    func(w *WaitingTree) { w.Nodes[1].Ended = &SubagentResult{Status: StatusCompleted} },
		"remote root": func(w *WaitingTree) {
			w.Nodes[0].Remote = &WaitingRemote{Peer: "peer:b", TaskID: "t", Number: 1, Key: "k"}
		},
		"child under it": func(w *WaitingTree) {
			w.Nodes = append(w.Nodes, WaitingNode{Handle: "g", ParentHandle: "r", Payload: validPayload(), Ended: &SubagentResult{Status: StatusCompleted}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := waitingTreeWithRemote()
			mutate(&w)
			if err := w.Validate(); !errors.Is(err, ErrBadWaitingTree) {
				t.Fatalf("got %v, want %v", err, ErrBadWaitingTree)
			}
		})
	}
}
