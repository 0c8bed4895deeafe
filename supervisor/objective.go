package supervisor

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
)

// A large objective is kept where it came from, not by the node.
//
// A tree whose starter can read its root's objective back
// (StartRequest.ObjectiveFrom: the A2A task's first message, kept by a
// durable task store), and a nested subagent whose ObjectiveKeeper can (the
// nested task's first message), keep, once the child has its payload, only
// the objective's first objectiveHead bytes when it is over leaveObjectiveAbove:
// NodeInfo.Objective is then that head (every display of it clips shorter),
// and what needs the whole payload again (a suspended root given its
// process back, the record of a waiting tree) reads the objective back
// (wholeObjective).

const (
	// leaveObjectiveAbove is the size over which an objective is left to
	// the node's objectiveFrom once its child has it.
	leaveObjectiveAbove = 16 << 10
	// objectiveHead is how much of a left objective the node keeps.
	objectiveHead = 1 << 10
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
	head := o[:objectiveHead]
	for !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	n.payload.Contract.Objective = strings.Clone(head) // not a slice of the whole
	n.objectiveLeft = true
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
