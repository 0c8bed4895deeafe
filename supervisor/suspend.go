package supervisor

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// Suspension (Config.InputHold): a tree whose root's question has waited
// InputHold, and in which every live subagent waits in subagent.ask (the
// asker and each one passing its question up: a waiting tree), gives back
// its processes and their slots. Each such subagent's subagent.ask call
// carried its conversation (api.ToolCall.Conversation); the supervisor
// keeps it with the node, ends the process through the kill ladder
// (ctrl/cancel first; the result the child sends then is not its result),
// reaps it and gives back its process slot. The node itself stays: its
// handle, agent path, place in the tree, deadline and usage, and its
// subagent.ask call still waits in the supervisor, so the question, its
// passing up and its answer work as for a running tree. When the call's
// result comes (the answer), a new process is started for the node, under
// the same handle, from the stored conversation with that result
// (api.SpawnPayload.Resume), after it takes a slot again. A subagent whose
// conversation was too large to carry keeps the tree from being suspended.
//
// The root's process slot is the run's (its admission ticket holds it): it
// is given back through Config.Budget too, and taken again when the tree
// resumes, or re-taken over the bound (SlotReclaimer) when the tree ends
// while suspended, so the run's own release at its end balances.

// SlotReclaimer is a ProcessBudget that can take back a slot over its
// bound: the one a suspended root gave back, when its tree ends before it
// resumed (the run's end releases it again).
type SlotReclaimer interface {
	Reclaim()
}

// resumeRetry is how often a suspended node tries for a process slot again
// when the budget has none.
const resumeRetry = 20 * time.Millisecond

// holdState is a node's part in suspension, guarded by node.mu.
type holdState struct {
	conv      *api.Conversation   // the pending subagent.ask call's conversation; nil when none
	saved     *api.Conversation   // conv when the node was suspended
	suspended *proc               // the process ended to give back its slot; nil when not suspended
	answer    chan api.ToolResult // cap 1: the pending call's result, for the next process
	resume    *api.Resume         // the next process's Resume, taken by deliver
	rootSlot  bool                // a root that gave back its process slot
}

// holdConversation records the conversation of n's pending subagent.ask
// call; the call's end clears it (resumeWith).
func (n *node) holdConversation(c *api.Conversation) {
	if c == nil || c.Validate() != nil {
		return
	}
	n.mu.Lock()
	n.hold.conv = c
	n.mu.Unlock()
}

// resumeWith takes the result of n's pending subagent.ask call made by p:
// when p was suspended, the result is kept for n's next process and it
// reports true (nothing is sent to p).
func (n *node) resumeWith(p *proc, res api.ToolResult) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hold.conv = nil
	if n.hold.suspended != p || p == nil {
		return false
	}
	n.hold.answer <- res // cap 1; one pending call per process
	return true
}

// suspendedProc is the process n's suspension ended, or nil.
func (n *node) suspendedProc() *proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hold.suspended
}

// holdable reports whether n waits in subagent.ask with a stored
// conversation, a process of its own and no stop under way. n.mu is held.
func (n *node) holdableLocked() bool {
	return !n.nest.remote && n.nest.workflow == nil && n.nest.exec == nil &&
		n.proc != nil && n.proc.spawned.Load() && !n.killing && n.verdict == nil && n.result == nil &&
		n.hold.conv != nil && n.hold.suspended == nil && n.ask.q != nil && n.ask.q.open()
}

// holdTimer suspends t once its root's question q has waited InputHold,
// trying again each InputHold while t is not a waiting tree; the returned
// stop ends it.
func (s *Supervisor) holdTimer(t *tree, q *Question) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var timer *time.Timer
	var try func()
	try = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || !q.open() {
			return
		}
		if !s.suspendTree(t) {
			timer = time.AfterFunc(s.cfg.InputHold, try)
		}
	}
	mu.Lock()
	timer = time.AfterFunc(s.cfg.InputHold, try)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}

// suspendTree suspends t if it is a waiting tree: every live node holdable.
// It reports whether it did.
func (s *Supervisor) suspendTree(t *tree) bool {
	nodes := t.root.subtree() // deepest first, as the ladder wants them
	var live []*node
	for _, m := range nodes {
		select {
		case <-m.done:
			continue
		default:
		}
		m.mu.Lock()
		ok := m.holdableLocked()
		m.mu.Unlock()
		if !ok {
			return false
		}
		live = append(live, m)
	}
	// Marked, a node's answer goes to its next process whenever it comes
	// (resumeWith), so a node answered between the check and its mark is
	// left running, and one answered after is resumed: both are right.
	var held []*node
	for _, m := range live {
		m.mu.Lock()
		if m.holdableLocked() {
			m.hold.suspended, m.hold.saved = m.proc, m.hold.conv
			m.hold.answer = make(chan api.ToolResult, 1)
			held = append(held, m)
		}
		m.mu.Unlock()
	}
	if len(held) == 0 {
		return false
	}
	s.log.InfoContext(t.root.spanCtx(), "waiting tree suspended: its processes end and give back their slots", "root_handle", t.root.handle,
		"subagents", len(held), "input_hold", s.cfg.InputHold.String())
	go s.ladder(held, "suspended: waiting for an answer past the input hold")
	return true
}

// giveBackSlot returns the process slot of a suspended node.
func (s *Supervisor) giveBackSlot(n *node) {
	if s.cfg.Budget == nil {
		return
	}
	switch {
	case n.budgeted:
		n.budgeted = false
		s.cfg.Budget.Release()
	case n.parent == nil:
		n.mu.Lock()
		n.hold.rootSlot = true
		n.mu.Unlock()
		s.cfg.Budget.Release()
	}
}

// retakeSlot takes a slot for a suspended node that resumes, waiting while
// the budget has none; it reports false when n was stopped meanwhile.
func (s *Supervisor) retakeSlot(n *node, nested bool) bool {
	if s.cfg.Budget == nil || (!nested && !n.rootGaveSlot()) {
		return true
	}
	t := time.NewTicker(resumeRetry)
	defer t.Stop()
	for !s.cfg.Budget.TryAcquire() {
		select {
		case <-t.C:
		case <-n.killed:
			return false
		}
	}
	if nested {
		n.budgeted = true
	} else {
		n.mu.Lock()
		n.hold.rootSlot = false
		n.mu.Unlock()
	}
	return true
}

func (n *node) rootGaveSlot() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hold.rootSlot
}

// reclaimRootSlot takes back a suspended root's slot, over the bound, when
// its tree ends before it resumed.
func (s *Supervisor) reclaimRootSlot(n *node) {
	if n.parent != nil || !n.rootGaveSlot() {
		return
	}
	if r, ok := s.cfg.Budget.(SlotReclaimer); ok {
		r.Reclaim()
	} else {
		s.cfg.Budget.TryAcquire()
	}
	n.mu.Lock()
	n.hold.rootSlot = false
	n.mu.Unlock()
}

// afterProcess is called when n's process has ended with res. For a node
// suspended, it gives back the slot, waits for its pending call's result
// and prepares the next process: again reports true. Otherwise (not
// suspended, stopped while suspended, past its deadline) it returns the
// node's result.
func (s *Supervisor) afterProcess(n *node, res api.SubagentResult, log *slog.Logger) (api.SubagentResult, bool) {
	n.mu.Lock()
	p, answer := n.hold.suspended, n.hold.answer
	stopped := n.verdict != nil || n.killing
	n.mu.Unlock()
	if p == nil {
		return res, false
	}
	select {
	case <-n.abandoned:
		return res, false // the ladder gave up on the process: no other starts
	default:
	}
	if stopped {
		return res, false
	}
	nested := n.budgeted
	s.giveBackSlot(n)
	log.Info("subagent suspended", "exit", exitString(p))
	if s.cfg.Observer != nil {
		s.cfg.Observer.NodeProgress(n.info())
	}
	var out api.ToolResult
	select {
	case out = <-answer:
	case <-n.killed:
		s.reclaimRootSlot(n)
		return s.finish(n, p, verdict{status: api.StatusCancelled, detail: "stopped while suspended"}), false
	}
	if d := n.deadlineNow(); !time.Now().Before(d) {
		s.reclaimRootSlot(n)
		s.judge(n, verdict{status: api.StatusDeadline, detail: fmt.Sprintf("deadline of %s passed while suspended", n.payload.Limits.Deadline)})
		return s.finish(n, p, verdict{}), false
	}
	if !s.retakeSlot(n, nested) {
		s.reclaimRootSlot(n)
		return s.finish(n, p, verdict{status: api.StatusCancelled, detail: "stopped while suspended"}), false
	}
	n.mu.Lock()
	n.hold.resume = &api.Resume{Conversation: *n.hold.saved, Answer: out.Text(), IsError: out.IsError}
	n.hold.suspended, n.hold.answer, n.hold.saved = nil, nil, nil
	n.result = nil // the suspended process's cancelled result is not the node's
	n.mu.Unlock()
	log.Info("subagent resumes from its stored conversation", "is_error", out.IsError)
	return api.SubagentResult{}, true
}

// takeResume returns the Resume n's next process starts from, once.
func (n *node) takeResume() *api.Resume {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.hold.resume
	n.hold.resume = nil
	return r
}

// Waiting returns the record of r's tree while it is a waiting tree (every
// live subagent waits in subagent.ask with its conversation, or is
// suspended), with the root's question; false when it is not one. The
// record is what a tree started from it (StartRequest.Resume) needs, in
// this process or another.
func (r *Run) Waiting() (*api.WaitingTree, bool) {
	root := r.n
	q, _ := root.asking()
	if q == nil {
		return nil, false
	}
	w := &api.WaitingTree{Version: api.WaitingTreeVersion, Question: q.Q, At: time.Now().UTC()}
	t := root.nest.tree
	t.mu.Lock() // nest.spawnedBefore; then each node's lock
	defer t.mu.Unlock()
	var walk func(n *node) bool
	walk = func(n *node) bool {
		select {
		case <-n.done:
			return true
		default:
		}
		n.mu.Lock()
		conv := n.hold.saved
		if n.hold.suspended == nil {
			conv = nil
			if n.holdableLocked() {
				conv = n.hold.conv
			}
		}
		wn := api.WaitingNode{Handle: n.handle, Disposition: n.nest.disposition, Payload: n.payload, Spawned: len(n.children) + n.nest.spawnedBefore}
		children := append([]*node(nil), n.children...)
		n.mu.Unlock()
		if conv == nil || n.wholeObjective(&wn.Payload) != nil {
			return false
		}
		wn.Conversation = *conv
		wn.Remaining = api.Duration(time.Until(n.deadlineNow()))
		if n.parent != nil {
			wn.ParentHandle = n.parent.handle
		}
		w.Nodes = append(w.Nodes, wn)
		for _, c := range children {
			if !walk(c) {
				return false
			}
		}
		return true
	}
	if !walk(root) {
		return nil, false
	}
	return w, true
}

// resumed returns the payload of a node of a stored waiting tree, started
// from its conversation with answer, its deadline what it had left (less the
// time since the record, when the wait is charged).
func (s *Supervisor) resumedPayload(w *api.WaitingTree, wn *api.WaitingNode, answer string) api.SpawnPayload {
	p := wn.Payload
	p.Resume = &api.Resume{Conversation: wn.Conversation, Answer: answer}
	left := wn.Remaining.D()
	if s.cfg.AskChargesDeadline {
		left -= time.Since(w.At)
	}
	p.Limits.Deadline = api.Duration(max(left, time.Millisecond))
	return p
}

// attachResumed registers the non-root nodes of a stored waiting tree under
// root, each from its conversation with answer; their goroutines are
// started by the caller. A node the chokepoint's registration refuses
// (the process budget, a drain) fails the whole: the error names it.
func (s *Supervisor) attachResumed(root *node, w *api.WaitingTree, answer string) ([]*node, error) {
	t := root.nest.tree
	t.mu.Lock()
	defer t.mu.Unlock()
	byHandle := map[string]*node{root.handle: root}
	root.nest.spawnedBefore = w.Nodes[0].Spawned
	var out []*node
	for i := 1; i < len(w.Nodes); i++ {
		wn := &w.Nodes[i]
		parent := byHandle[wn.ParentHandle]
		p := s.resumedPayload(w, wn, answer)
		if err := s.fitsFrame(&p); err != nil {
			return out, fmt.Errorf("resume subagent %s: %w", p.AgentPath, err)
		}
		child := newNode(wn.Handle, parent, p)
		child.nest = nest{tree: t, disposition: wn.Disposition, provider: localProvider, spawnedBefore: wn.Spawned}
		child.span = startSpawnSpan(root.spanCtx(), &child.payload, localProvider)
		if refusal := s.registerLocked(parent, child); refusal != "" {
			child.span.End()
			return out, fmt.Errorf("resume subagent %s: %s", p.AgentPath, refusal)
		}
		s.stats.spawn(localProvider)
		byHandle[child.handle] = child
		out = append(out, child)
	}
	// spawnedBefore counts the children restored too: new ones come after.
	for _, n := range byHandle {
		n.nest.spawnedBefore -= len(n.children)
	}
	return out, nil
}
