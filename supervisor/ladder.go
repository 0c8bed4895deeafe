package supervisor

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
)

const (
	sigTerm = unix.SIGTERM
	sigKill = unix.SIGKILL
)

// judge gives n the verdict v unless it already has one (the first verdict
// wins), and counts it. It reports whether v was taken.
func (s *Supervisor) judge(n *node, v verdict) bool {
	n.mu.Lock()
	first := n.verdict == nil
	if first {
		n.verdict = &v
	}
	n.mu.Unlock()
	if first {
		s.stats.verdict(v)
	}
	return first
}

// killSubtree gives n the verdict v, its descendants a cancelled verdict, and
// starts the kill ladder over the subtree. It returns at once and is idempotent:
// nodes already on a ladder are not laddered twice. A zero v leaves n's own
// status to its result.
func (s *Supervisor) killSubtree(n *node, v verdict, reason string) {
	var fresh []*node
	// A spawn attaches a child only to a parent not yet marked killing, so a
	// second walk after marking finds any child attached during the first.
	for again := true; again; {
		again = false
		for _, m := range n.subtree() {
			if m == n {
				if v.status != "" {
					s.judge(m, v)
				}
			} else {
				m.setVerdict(verdict{status: api.StatusCancelled, detail: "cancelled: an ancestor was stopped (" + reason + ")"})
			}
			m.mu.Lock()
			if !m.killing {
				m.killing = true
				close(m.killed)
				fresh = append(fresh, m)
				again = true
			}
			m.mu.Unlock()
		}
	}
	if len(fresh) > 0 {
		s.releaseHeld(fresh) // spawns held by a pause end without a process
		go s.ladder(fresh, reason)
	}
}

// killAtOnce gives n the verdict v (counted), SIGKILLs its process group
// without the ladder's earlier rungs (the ladder then skips it), and runs the
// ladder on its descendants: for a child that must not take another step (a
// protocol violation, a token grant overrun).
func (s *Supervisor) killAtOnce(n *node, v verdict, reason string) {
	s.judge(n, v)
	if p := n.getProc(); p != nil {
		s.kill(n, p, reason)
	}
	s.killSubtree(n, v, reason)
}

// kill sends SIGKILL to p's process group at once, without the ladder (a
// protocol violation, a child that failed before it had work, the second
// signal), and counts the rung. A process is SIGKILLed once: a second kill
// (the ladder and the supervising goroutine may both get there) does nothing.
// It reports whether the signal was sent.
func (s *Supervisor) kill(n *node, p *proc, reason string) bool {
	if p.killed.Swap(true) {
		return false
	}
	return s.signalRung(n, p, sigKill, reason)
}

// unreapable counts p as a process that did not reap inside its kill budget,
// once however many waiters give up on it, and reports whether this call
// counted it (and so should report it).
func (s *Supervisor) unreapable(p *proc) bool {
	if p.unreaped.Swap(true) {
		return false
	}
	s.unreaped.Add(1)
	return true
}

// signalRung counts, logs and sends one signal rung to a live child. The count
// and the log come first, so they happen before the reap they may cause (and
// so before the node's end is published); a child that dies on its own in the
// instant between is counted without being signalled.
func (s *Supervisor) signalRung(n *node, p *proc, sig unix.Signal, reason string) bool {
	if p.exited() {
		return false
	}
	msg := "kill ladder: SIGKILL"
	if sig == sigTerm {
		s.stats.terms.Add(1)
		msg = "kill ladder: SIGTERM"
	} else {
		s.stats.kills.Add(1)
	}
	s.log.WarnContext(n.spanCtx(), msg, "pid", p.pid, "agent_path", n.payload.AgentPath, "reason", reason)
	return p.signal(sig)
}

// ladder runs the bounded kill ladder over nodes, which are ordered deepest
// first: ctrl/cancel, DrainGrace, SIGTERM to each process group, KillGrace,
// SIGKILL, ReapGrace. A process still unreaped after that is reported and
// counted, and its node is abandoned so the supervisor does not hang on it.
//
// An exec child has no control channel: its first rung is SIGTERM, at once,
// and when no member of the ladder was sent ctrl/cancel the DrainGrace wait is
// skipped, so an exec child alone goes SIGTERM, KillGrace, SIGKILL.
//
// ctrl/cancel is written on its own goroutine per child (each write is bounded
// by the write deadline): a child that stopped reading its control-in must not
// hold up the rungs of the others.
func (s *Supervisor) ladder(nodes []*node, reason string) {
	type member struct {
		n      *node
		p      *proc
		termed bool // SIGTERM already sent (an exec child's first rung)
	}
	var ms []*member
	var procs []*proc
	for _, n := range nodes {
		if p := n.getProc(); p != nil {
			ms = append(ms, &member{n: n, p: p})
			procs = append(procs, p)
		}
	}
	cancelled := false
	for _, m := range ms {
		switch {
		case m.p.exited() || m.p.killed.Load():
		case !m.p.controlled():
			s.signalRung(m.n, m.p, sigTerm, reason)
			m.termed = true
		case m.p.spawned.Load():
			s.stats.cancels.Add(1)
			cancelled = true
			s.log.InfoContext(m.n.spanCtx(), "kill ladder: ctrl/cancel", "pid", m.p.pid, "agent_path", m.n.payload.AgentPath, "reason", reason)
			go func(p *proc) { _ = p.w.Send(api.MethodCancel, 0, api.Cancel{Reason: reason}) }(m.p)
		default:
			s.kill(m.n, m.p, reason+" (before its payload)") // no payload yet, no work to save
		}
	}
	if cancelled {
		if waitAll(procs, s.cfg.DrainGrace) {
			return
		}
		for _, m := range ms {
			if m.termed || m.p.killed.Load() || m.p.exited() {
				continue
			}
			s.signalRung(m.n, m.p, sigTerm, reason)
		}
	}
	if waitAll(procs, s.cfg.KillGrace) {
		return
	}
	for _, m := range ms {
		if !m.p.exited() && !m.p.killed.Load() {
			s.kill(m.n, m.p, reason)
		}
	}
	if waitAll(procs, s.cfg.ReapGrace) {
		return
	}
	for _, m := range ms {
		if m.p.exited() {
			continue
		}
		if s.unreapable(m.p) {
			s.log.ErrorContext(m.n.spanCtx(), "process would not reap inside the kill budget", "pid", m.p.pid, "agent_path", m.n.payload.AgentPath, "reason", reason)
		}
		close(m.n.abandoned)
	}
}

// waitAll waits until every process is reaped, or d passes.
func waitAll(procs []*proc, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-t.C:
			return false
		}
	}
	return true
}
