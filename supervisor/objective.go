package supervisor

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentd/agentd/api"
)

// A large objective is kept where it came from, not by the node.
//
// A tree whose starter can read its root's objective back
// (StartRequest.ObjectiveFrom: the A2A task's first message, kept by a
// durable task store), and a nested subagent whose ObjectiveKeeper can (the
// nested task's first message), keep, once the child has its payload, only
// the objective's first objectiveHead characters when it is over
// leaveObjectiveAbove: NodeInfo.Objective is then that head (every display of
// a node's objective, a2a.Tree's and the console's ended list, clips it to
// api.MaxTreeObjective characters, with "…" when there were more: one
// character more than that shows as the whole does), and what needs the
// whole payload again (a suspended root given its process back, the record
// of a waiting tree) reads the objective back (wholeObjective).

const (
	// leaveObjectiveAbove is the size over which an objective is left to
	// the node's objectiveFrom once its child has it.
	leaveObjectiveAbove = 16 << 10
	// objectiveHead is how many characters of a left objective the node
	// keeps: a display's clip and one more, so that it shows cut (issue 35:
	// 1 KiB, about 860 bytes of the supervisor's heap per live child more
	// than an ASCII head's 161).
	objectiveHead = api.MaxTreeObjective + 1
)

// leaveObjective keeps only the head of n's objective, when it can be read
// back and is large; its encoded size (the memory policy's) is taken first.
// deliver calls it once the child has its payload.
func (n *node) leaveObjective() {
	if n.objectiveFrom == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	o := n.payload.Contract.Objective
	if n.objectiveLeft || len(o) <= leaveObjectiveAbove {
		return
	}
	if n.payloadBytes.Load() == 0 {
		if size, err := jsonSize(&n.payload); err == nil {
			n.payloadBytes.Store(size)
		}
	}
	n.payload.Contract.Objective = strings.Clone(objectiveHeadOf(o)) // not a slice of the whole
	n.objectiveLeft = true
}

// objectiveHeadOf is o's first objectiveHead characters (runes as a range
// over o decodes them, an invalid byte one), or o if it has no more.
func objectiveHeadOf(o string) string {
	c := 0
	for i := range o {
		if c == objectiveHead {
			return o[:i]
		}
		c++
	}
	return o
}

// wholeObjective sets p's objective, a copy of n's payload, to n's whole
// objective when n left it (leaveObjective), read back.
func (n *node) wholeObjective(p *api.SpawnPayload) error {
	n.mu.Lock()
	left := n.objectiveLeft
	n.mu.Unlock()
	if !left {
		return nil
	}
	o, err := n.objectiveFrom(context.Background())
	if err != nil {
		return fmt.Errorf("read the objective back: %w", err)
	}
	p.Contract.Objective = o
	return nil
}
