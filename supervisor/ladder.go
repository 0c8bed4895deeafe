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

// killSubtree gives n the verdict v, its descendants a cancelled verdict, and
// starts the kill ladder over the subtree. It returns at once and is idempotent:
// nodes already on a ladder are not laddered twice.
func (s *Supervisor) killSubtree(n *node, v verdict, reason string) {
	nodes := n.subtree()
	var fresh []*node
	for _, m := range nodes {
		if m == n {
			m.setVerdict(v)
		} else {
			m.setVerdict(verdict{status: api.StatusCancelled, detail: "cancelled: an ancestor was stopped (" + reason + ")"})
		}
		m.mu.Lock()
		if !m.killing {
			m.killing = true
			fresh = append(fresh, m)
		}
		m.mu.Unlock()
	}
	if len(fresh) > 0 {
		s.releaseHeld(fresh) // spawns held by a pause end without a process
		go s.ladder(fresh, reason)
	}
}

// ladder runs the bounded kill ladder over nodes, which are ordered deepest
// first: ctrl/cancel, DrainGrace, SIGTERM to each process group, KillGrace,
// SIGKILL, ReapGrace. A process still unreaped after that is reported and
// counted, and its node is abandoned so the supervisor does not hang on it.
func (s *Supervisor) ladder(nodes []*node, reason string) {
	var procs []*proc
	for _, n := range nodes {
		if p := n.getProc(); p != nil {
			procs = append(procs, p)
		}
	}
	for _, p := range procs {
		if p.spawned.Load() {
			_ = p.w.Send(api.MethodCancel, 0, api.Cancel{Reason: reason})
		} else {
			p.signal(sigKill) // no payload yet, no work to save
		}
	}
	if waitAll(procs, s.cfg.DrainGrace) {
		return
	}
	for _, p := range procs {
		if p.signal(sigTerm) {
			s.log.Warn("kill ladder: SIGTERM", "pid", p.pid, "reason", reason)
		}
	}
	if waitAll(procs, s.cfg.KillGrace) {
		return
	}
	for _, p := range procs {
		if p.signal(sigKill) {
			s.log.Warn("kill ladder: SIGKILL", "pid", p.pid, "reason", reason)
		}
	}
	if waitAll(procs, s.cfg.ReapGrace) {
		return
	}
	for _, n := range nodes {
		p := n.getProc()
		if p == nil || p.exited() {
			continue
		}
		s.unreaped.Add(1)
		s.log.Error("process would not reap inside the kill budget", "pid", p.pid, "agent_path", n.payload.AgentPath)
		close(n.abandoned)
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
