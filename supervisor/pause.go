package supervisor

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// Pause semantics (the operator's a2a.Pause and a2a.Resume):
//
//   - Nothing is killed and nothing is refused. A pause holds work; Resume lets
//     it go on where it stopped.
//   - Spawns are held: a subagent started while paused (a new tree's root, or a
//     nested spawn once it has passed the chokepoint) is registered at once and
//     visible in the tree, but its process is not forked until Resume. A held
//     spawn still ends on its deadline, on a cancel and on a drain, without ever
//     having had a process.
//   - Model calls are held: every running child is sent ctrl/pause and stops
//     before its next model call (a call already in flight finishes); ctrl/resume
//     releases it. A child whose payload is delivered while paused gets
//     ctrl/pause right after the payload, so it holds before its first call.
//   - Deadlines keep running while paused.

// pauseGate is the supervisor's pause state. Lock order: a node's pauseSync.mu,
// then pauseGate.mu.
type pauseGate struct {
	mu     sync.Mutex // guards paused, gen, resumed, held, synced, subtrees
	paused bool
	// subtrees are the subagents paused by a2a.Pause with their handle:
	// each, and every subagent below it, holds before its next model call.
	subtrees map[*node]bool
	gen      uint64                  // counts the changes of paused
	resumed  chan struct{}           // closed by Resume; nil while not paused
	held     map[*node]chan struct{} // spawns held by the pause; closed to release one
	synced   map[*node]*pauseSync    // what each spawned child was last told
}

// pauseSync orders the ctrl/pause and ctrl/resume frames of one child so the
// last frame it gets matches the last state set.
type pauseSync struct {
	mu     sync.Mutex // guards paused, gen
	paused bool       // the state the child was last told
	gen    uint64     // the pauseGate.gen of the change that frame carried
}

// Pause holds new spawns and tells every running child to hold before its next
// model call. It returns how many children were told; a second Pause tells
// nobody. Safe for concurrent use.
func (s *Supervisor) Pause() int { return s.setPaused(true) }

// Resume releases held spawns and tells paused children to go on. It returns
// how many subagents it released. Safe for concurrent use.
func (s *Supervisor) Resume() int { return s.setPaused(false) }

// Paused reports whether the supervisor is paused.
func (s *Supervisor) Paused() bool {
	g := &s.pause
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

// Held reports the handles of the spawns a pause holds.
func (s *Supervisor) Held() map[string]bool {
	g := &s.pause
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]bool, len(g.held))
	for n := range g.held {
		out[n.handle] = true
	}
	return out
}

// setPaused changes the pause state and tells every spawned child.
func (s *Supervisor) setPaused(paused bool) int {
	ch := s.changePause(paused)
	return s.tellPause(ch) + ch.released
}

// pauseChange is one call's change of the pause state.
type pauseChange struct {
	paused   bool
	changed  bool   // the state was different before
	gen      uint64 // the change's number
	released int    // held spawns it released
}

// changePause sets the pause state: the first half of setPaused.
func (s *Supervisor) changePause(paused bool) pauseChange {
	g := &s.pause
	g.mu.Lock()
	ch := pauseChange{paused: paused, changed: g.paused != paused}
	g.paused = paused
	if ch.changed {
		g.gen++
		if paused {
			g.resumed = make(chan struct{})
		} else {
			close(g.resumed)
			g.resumed = nil
			ch.released = len(g.held)
		}
	}
	ch.gen = g.gen
	g.mu.Unlock()
	if ch.changed {
		s.log.Info("supervisor pause changed", "paused", paused)
	}
	return ch
}

// tellPause tells every spawned child the state ch set, and counts the
// children told of that change, whoever sent the frame: a child whose payload
// was just delivered gets it from its own supervising goroutine (syncPause
// right after the payload), which may win the race with this loop.
func (s *Supervisor) tellPause(ch pauseChange) int {
	told := 0
	for _, n := range s.liveNodes() {
		p := n.getProc()
		if p == nil || !p.spawned.Load() || !p.controlled() {
			continue // nothing to tell: not started, or an exec child
		}
		s.syncPause(n, p)
		if ch.changed && s.toldOf(n, ch.paused, ch.gen) {
			told++
		}
	}
	return told
}

// toldOf reports whether n was last told paused by the change numbered gen.
func (s *Supervisor) toldOf(n *node, paused bool, gen uint64) bool {
	g := &s.pause
	g.mu.Lock()
	ps := g.synced[n]
	g.mu.Unlock()
	if ps == nil {
		return false
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.paused == paused && ps.gen == gen
}

func (s *Supervisor) liveNodes() []*node { return s.appendLiveNodes(nil) }

// appendLiveNodes appends every node in the tree to out.
func (s *Supervisor) appendLiveNodes(out []*node) []*node {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		out = append(out, n)
	}
	return out
}

// syncPause tells a spawned child the current pause state if it was last told
// otherwise (a child starts unpaused). It reports whether a frame was sent.
func (s *Supervisor) syncPause(n *node, p *proc) bool {
	g := &s.pause
	g.mu.Lock()
	ps := g.synced[n]
	if ps == nil {
		if !g.wantPausedLocked(n) {
			g.mu.Unlock()
			return false // never paused: nothing to tell
		}
		ps = &pauseSync{}
		if g.synced == nil {
			g.synced = make(map[*node]*pauseSync)
		}
		g.synced[n] = ps
	}
	g.mu.Unlock()

	ps.mu.Lock()
	defer ps.mu.Unlock()
	g.mu.Lock()
	want, gen := g.wantPausedLocked(n), g.gen
	g.mu.Unlock()
	if ps.paused == want {
		return false
	}
	method := api.MethodResume
	if want {
		method = api.MethodPause
	}
	if err := p.w.Send(method, 0, nil); err != nil {
		s.log.WarnContext(n.spanCtx(), "pause state not delivered", "method", method, "task_id", n.handle, "err", err)
		return false
	}
	ps.paused, ps.gen = want, gen
	return true
}

// holdWhilePaused holds a spawn until Resume, a kill of its subtree, or its
// deadline. It reports false, with the verdict recorded on n, when the spawn
// must not start.
func (s *Supervisor) holdWhilePaused(n *node) bool {
	g := &s.pause
	g.mu.Lock()
	if !g.paused {
		g.mu.Unlock()
		return true
	}
	release := make(chan struct{})
	if g.held == nil {
		g.held = make(map[*node]chan struct{})
	}
	g.held[n] = release
	resumed := g.resumed
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.held, n)
		g.mu.Unlock()
	}()
	// A kill that came before the registration above found nothing to release.
	if n.stopping() {
		return false
	}
	s.log.InfoContext(n.spanCtx(), "spawn held by pause", "task_id", n.handle, "agent_path", n.payload.AgentPath)
	deadline := time.NewTimer(time.Until(n.deadline))
	defer deadline.Stop()
	select {
	case <-resumed:
		if !n.stopping() {
			return true
		}
	case <-release:
	case <-deadline.C:
		n.setVerdict(verdict{status: api.StatusDeadline, detail: fmt.Sprintf("deadline of %s passed while held by a pause", n.payload.Limits.Deadline)})
	}
	return false
}

// releaseHeld wakes held spawns that are being killed, so they end at once.
func (s *Supervisor) releaseHeld(nodes []*node) {
	g := &s.pause
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range nodes {
		if ch, ok := g.held[n]; ok {
			close(ch)
			delete(g.held, n)
		}
	}
}

// forgetPause drops what the gate knows about an ended node.
func (s *Supervisor) forgetPause(n *node) {
	g := &s.pause
	g.mu.Lock()
	delete(g.synced, n)
	delete(g.subtrees, n)
	g.mu.Unlock()
}

// wantPausedLocked reports whether n should hold: the service is paused, or
// n or a subagent above it was paused by handle. g.mu is held.
func (g *pauseGate) wantPausedLocked(n *node) bool {
	return g.paused || g.inPausedSubtreeLocked(n)
}

// inPausedSubtreeLocked reports whether n or a subagent above it was paused
// by handle. g.mu is held.
func (g *pauseGate) inPausedSubtreeLocked(n *node) bool {
	for m := n; m != nil && len(g.subtrees) > 0; m = m.parent {
		if g.subtrees[m] {
			return true
		}
	}
	return false
}

// PauseSubtree holds the live subagent handle and every subagent below it
// before their next model call (ctrl/pause), while the rest of the service
// goes on; a subagent spawned into the subtree holds from its first call.
// It returns how many children were told. Safe for concurrent use.
func (s *Supervisor) PauseSubtree(handle string) (int, error) {
	return s.setSubtreePaused(handle, true)
}

// ResumeSubtree undoes PauseSubtree of handle: its subtree goes on (a
// subagent below it paused by its own handle, or a service-wide pause,
// still holds). It returns how many children were told.
func (s *Supervisor) ResumeSubtree(handle string) (int, error) {
	return s.setSubtreePaused(handle, false)
}

// setSubtreePaused changes handle's subtree pause and tells its children.
func (s *Supervisor) setSubtreePaused(handle string, paused bool) (int, error) {
	s.mu.Lock()
	n := s.nodes[handle]
	s.mu.Unlock()
	verb := map[bool]string{true: "pause", false: "resume"}[paused]
	if n == nil {
		return 0, fmt.Errorf("%s %s: %w (it ended, or never was)", verb, handle, ErrNoSuchSubagent)
	}
	if n.nest.exec != nil {
		return 0, fmt.Errorf("%s %s: an exec child runs a command, not a model: there is no model call to hold", verb, handle)
	}
	g := &s.pause
	g.mu.Lock()
	if !paused && !g.subtrees[n] {
		g.mu.Unlock()
		return 0, fmt.Errorf("resume %s: %w", handle, ErrNotPaused)
	}
	if paused {
		if g.subtrees == nil {
			g.subtrees = make(map[*node]bool)
		}
		g.subtrees[n] = true
	} else {
		delete(g.subtrees, n)
	}
	g.mu.Unlock()
	s.log.Info("subtree pause changed", "task_id", handle, "agent_path", n.payload.AgentPath, "paused", paused)
	told := 0
	for _, m := range n.subtree() {
		p := m.getProc()
		if p == nil || !p.spawned.Load() || !p.controlled() || m.ended() {
			continue
		}
		if s.syncPause(m, p) {
			told++
		}
	}
	return told, nil
}

// ErrNotPaused: a2a.Resume named a subagent that no a2a.Pause named.
var ErrNotPaused = errors.New("supervisor: the subagent was not paused by its handle")

// PausedHandles reports the live subagents held by a pause of their
// subtree (PauseSubtree), the service-wide pause aside.
func (s *Supervisor) PausedHandles() map[string]bool {
	nodes := s.liveNodes()
	g := &s.pause
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]bool{}
	for _, n := range nodes {
		if g.inPausedSubtreeLocked(n) {
			out[n.handle] = true
		}
	}
	return out
}

// heldResult is the result of a spawn that never started.
func heldResult(n *node) api.SubagentResult {
	n.mu.Lock()
	defer n.mu.Unlock()
	res := api.SubagentResult{Status: api.StatusCancelled, Detail: "cancelled while held by a pause", Distillate: api.InlineText("")}
	if v := n.verdict; v != nil {
		res.Status, res.Cause, res.Detail = v.status, v.cause, v.detail
	}
	return res
}
