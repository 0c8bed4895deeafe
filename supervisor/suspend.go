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

	// A remote child's part (spawn.go superviseRemote): its run, whether
	// the peer's question is being asked now (askRemote), and once
	// suspended, the question its peer's task waits on and the channel its
	// answer comes on, for the next run (RemoteResumer).
	remoteRun    Remote
	remoteAsking bool
	remoteHeld   *api.WaitingRemote
	remoteAnswer chan remoteReply
}

// remoteReply is the answer to a remote child's question, or why none came.
type remoteReply struct {
	text string
	err  error
}

// remoteWaitingLocked returns the peer's question n, a remote child, waits
// on, when its run can say. n.mu is held.
func (n *node) remoteWaitingLocked() (api.WaitingRemote, bool) {
	if n.hold.remoteHeld != nil {
		return *n.hold.remoteHeld, true
	}
	w, ok := n.hold.remoteRun.(RemoteWaiter)
	if !ok || !n.hold.remoteAsking {
		return api.WaitingRemote{}, false
	}
	return w.WaitingOn()
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
	if n.nest.remote {
		// A remote child waiting on its peer's question: no process, and
		// its run can be detached and resumed.
		_, ok := n.remoteWaitingLocked()
		return ok && n.hold.remoteHeld == nil && !n.killing && n.verdict == nil && n.result == nil &&
			n.ask.q != nil && n.ask.q.open()
	}
	return n.nest.workflow == nil && n.nest.exec == nil &&
		n.proc != nil && n.proc.spawned.Load() && !n.killing && n.verdict == nil && n.result == nil &&
		n.hold.conv != nil && n.hold.suspended == nil && n.ask.q != nil && n.ask.q.open()
}

// holdTimer suspends t once its root's question q has waited InputHold:
// then, and when t becomes a waiting tree afterwards (a node ends or asks),
// or each InputHold again, until it is one; the returned stop ends it, once
// no suspension is being tried.
func (s *Supervisor) holdTimer(t *tree, q *Question) (stop func()) {
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		timer := time.NewTimer(s.cfg.InputHold)
		defer timer.Stop()
		held := false // InputHold has passed
		for {
			changed := t.changes()
			select {
			case <-quit:
				return
			case <-q.done:
				return
			case <-timer.C:
				held = true
				timer.Reset(s.cfg.InputHold)
			case <-changed:
				if !held {
					continue
				}
			}
			if s.suspendTree(t) {
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-exited
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
	// A remote child marked, its answer goes to its next run (askRemote).
	var held []*node
	var detach []RemoteWaiter
	for _, m := range live {
		m.mu.Lock()
		if m.holdableLocked() {
			if m.nest.remote {
				w, _ := m.remoteWaitingLocked()
				m.hold.remoteHeld, m.hold.remoteAnswer = &w, make(chan remoteReply, 1)
				detach = append(detach, m.hold.remoteRun.(RemoteWaiter))
			} else {
				m.hold.suspended, m.hold.saved = m.proc, m.hold.conv
				m.hold.answer = make(chan api.ToolResult, 1)
				held = append(held, m)
			}
		}
		m.mu.Unlock()
	}
	if len(held) == 0 && len(detach) == 0 {
		return false
	}
	s.log.InfoContext(t.root.spanCtx(), "waiting tree suspended: its processes end and give back their slots", "root_handle", t.root.handle,
		"subagents", len(held), "remote_children", len(detach), "input_hold", s.cfg.InputHold.String())
	for _, r := range detach {
		r.Detach() // its follow ends; the peer's task waits on
	}
	if len(held) > 0 {
		go s.ladder(held, "suspended: waiting for an answer past the input hold")
	}
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
// live subagent waits in subagent.ask on the root's question, the asker or
// passing it up, with its conversation, or is suspended), with the root's
// question and every ended subagent's result; false when it is not one. The
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
		n.mu.Lock() // leaveObjective changes a root's payload
		payload := n.payload
		n.mu.Unlock()
		wn := api.WaitingNode{Handle: n.handle, Disposition: n.nest.disposition, Payload: payload}
		if n.parent != nil {
			wn.ParentHandle = n.parent.handle
		}
		if n.ended() {
			// An ended child: its parent's await and status answer with
			// its result, after the resume as before. It spawns no more.
			if n.nest.exec != nil {
				return true // an exec child's report is not kept (its payload is not a subagent's)
			}
			res := n.final
			wn.Ended = &res
			n.mu.Lock()
			children := append([]*node(nil), n.children...)
			wn.Spawned = len(n.children) + n.nest.spawnedBefore
			n.mu.Unlock()
			w.Nodes = append(w.Nodes, wn)
			for _, c := range children {
				if !walk(c) {
					return false
				}
			}
			return true
		}
		n.mu.Lock()
		if n.nest.remote {
			rw, ok := n.remoteWaitingLocked()
			ok = ok && n.ask.q != nil && n.ask.q.Q.Handle == q.Q.Handle
			n.mu.Unlock()
			if !ok {
				return false
			}
			wn.Payload.Resume = nil
			wn.Remote = &rw
			wn.Remaining = api.Duration(time.Until(n.deadlineNow()))
			w.Nodes = append(w.Nodes, wn)
			return true // it has no children here
		}
		conv := n.hold.saved
		if n.hold.suspended == nil {
			conv = nil
			if n.holdableLocked() {
				conv = n.hold.conv
			}
		}
		// Only the root's question is answered by the answer the record
		// is resumed with: a subagent waiting on a question of its own
		// (one no one passed up) is not recorded.
		if n.ask.q == nil || n.ask.q.Q.Handle != q.Q.Handle {
			conv = nil
		}
		wn.Spawned = len(n.children) + n.nest.spawnedBefore
		children := append([]*node(nil), n.children...)
		n.mu.Unlock()
		if conv == nil || n.wholeObjective(&wn.Payload) != nil {
			return false
		}
		wn.Conversation = *conv
		wn.Remaining = api.Duration(time.Until(n.deadlineNow()))
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

// WaitingChanged returns a channel closed at the next change of r's tree
// that may make it a waiting tree, or change its record (a subagent ended,
// or asks): Waiting is then worth asking again.
func (r *Run) WaitingChanged() <-chan struct{} { return r.n.nest.tree.changes() }

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

// attachEnded restores an ended child of a stored waiting tree under
// parent: a node that has ended, with its result, and no process, goroutine
// or slot, so that its parent's subagent.await and subagent.status answer
// as they did before the record was taken. The caller holds the tree's mu.
func (s *Supervisor) attachEnded(parent *node, wn *api.WaitingNode) *node {
	t := parent.nest.tree
	c := newNode(wn.Handle, parent, wn.Payload)
	c.nest = nest{tree: t, disposition: wn.Disposition, provider: localProvider, spawnedBefore: wn.Spawned}
	c.final, c.usage = *wn.Ended, wn.Ended.Usage
	c.settleOnce.Do(func() { close(c.settled) })
	close(c.done)
	parent.mu.Lock()
	parent.children = append(parent.children, c)
	parent.mu.Unlock()
	t.total++
	t.nodes[c.handle] = c
	return c
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
		if wn.Ended != nil {
			byHandle[wn.Handle] = s.attachEnded(parent, wn)
			continue
		}
		if wn.Remote != nil {
			child, refusal := s.attachRemote(root, parent, w, wn, answer)
			if refusal != "" {
				return out, fmt.Errorf("resume remote child %s: %s", wn.Payload.AgentPath, refusal)
			}
			byHandle[child.handle] = child
			out = append(out, child)
			continue
		}
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

// attachRemote registers a remote child of a stored waiting tree under
// parent: its run sends answer to the peer's task it waited on, not a new
// delegation (superviseRemote). The caller holds the tree's mu.
func (s *Supervisor) attachRemote(root, parent *node, w *api.WaitingTree, wn *api.WaitingNode, answer string) (*node, string) {
	p := wn.Payload
	left := wn.Remaining.D()
	if s.cfg.AskChargesDeadline {
		left -= time.Since(w.At)
	}
	p.Limits.Deadline = api.Duration(max(left, time.Millisecond))
	child := newNode(wn.Handle, parent, p)
	child.nest = nest{tree: parent.nest.tree, disposition: wn.Disposition, provider: wn.Remote.Peer, remote: true, spawnedBefore: wn.Spawned}
	rw := *wn.Remote
	child.hold.remoteHeld, child.hold.remoteAnswer = &rw, make(chan remoteReply, 1)
	child.hold.remoteAnswer <- remoteReply{text: answer}
	child.span = startSpawnSpan(root.spanCtx(), &child.payload, child.nest.provider)
	if refusal := s.registerLocked(parent, child); refusal != "" {
		child.span.End()
		return nil, refusal
	}
	s.stats.spawn(child.nest.provider)
	return child, ""
}
