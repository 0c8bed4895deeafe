package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/memlimit"
)

// MemoryPolicy is the supervisor's memory watch (WatchMemory): how often it
// samples the memory in use, whom it tells, and which child it stops when a
// child outgrows its share. The policy is declared, and acts on the child,
// not on the pod: a child stopped for memory ends crashed with cause
// memory_exceeded (api.CauseMemoryExceeded) in its own result, its subtree
// cancelled, before the kernel's OOM killer would pick a process of its own.
type MemoryPolicy struct {
	// Interval is the time between samples; default 250ms.
	Interval time.Duration
	// ChildLimit stops a child whose PSS passes it; 0: no per-child limit.
	ChildLimit uint64
	// Limit, ChildCost and ChildFactor: when the pod's memory in use passes
	// Limit less ChildCost (within one child of the limit), the child
	// furthest over its share (ChildCost plus ChildFactor times its
	// payload's encoded bytes: what admission reserved for it) is stopped,
	// one a sample. Limit 0: no such pressure.
	Limit, ChildCost, ChildFactor uint64
	// FairShare caps a child's share under pressure at what the limit holds
	// for each live child, (Limit less this process's RSS) / children: when
	// admission took children past its count bounds (children measured
	// small), children that all grow toward their own shares would pass the
	// limit with none over its share, so the one furthest over the fair
	// share is stopped.
	FairShare bool
	// Usage reads the pod's memory in use (a cgroup's working set); nil: the
	// process tree's, this process's RSS plus each child's PSS.
	Usage func() (uint64, error)
	// Observe, if set, is given each sample: the pod's total and this
	// process's RSS.
	Observe func(total, self uint64)
	// Log receives the policy's acts; default the supervisor's.
	Log *slog.Logger
}

// WatchMemory samples the memory in use every p.Interval and applies p until
// ctx ends. A sample that cannot be read is skipped (logged once).
func (s *Supervisor) WatchMemory(ctx context.Context, p MemoryPolicy) {
	if p.Interval <= 0 {
		p.Interval = 250 * time.Millisecond
	}
	if p.Log == nil {
		p.Log = s.log
	}
	tick := time.NewTicker(p.Interval)
	defer tick.Stop()
	warned := false
	var m memSampler
	for {
		if err := s.sampleMemory(p, &m); err != nil && !warned {
			warned = true
			p.Log.Warn("memory sample not read", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// memSampler is what WatchMemory keeps from one sample to the next, so
// that a sample, which reads every live child's memory, allocates next to
// nothing: the /proc reader's buffer, the nodes, the children's PSS.
type memSampler struct {
	rd    memlimit.Reader
	nodes []*node
	kids  []sampledChild
	pss   map[int]uint64 // a child's PSS by pid, when the sample reads the process tree
}

// sampledChild is a live child and its PSS in one sample.
type sampledChild struct {
	n   *node
	pss uint64
}

// sampleMemory takes one sample and applies the policy. Without p.Usage the
// memory in use is the process tree's, and each child's PSS is read once
// for both the total and the child's share.
func (s *Supervisor) sampleMemory(p MemoryPolicy, m *memSampler) error {
	me, err := m.rd.Rollup(0)
	if err != nil {
		return err
	}
	var total uint64
	if p.Usage == nil {
		pids, err := m.rd.Children()
		if err != nil {
			return err
		}
		if m.pss == nil {
			m.pss = make(map[int]uint64)
		}
		clear(m.pss)
		total = me.RSS
		for _, pid := range pids {
			if r, err := m.rd.Rollup(pid); err == nil { // a child that ended meanwhile counts 0
				total += r.PSS
				m.pss[pid] = r.PSS
			}
		}
	}
	m.nodes = s.appendLiveNodes(m.nodes[:0])
	defer clear(m.nodes) // keeps no ended node from the collector
	m.kids = m.kids[:0]
	for _, n := range m.nodes {
		pr := n.getProc()
		if pr == nil || pr.pid <= 0 || n.stopping() {
			continue
		}
		select {
		case <-pr.done:
			continue
		default:
		}
		if p.Usage == nil {
			if pss, ok := m.pss[pr.pid]; ok {
				m.kids = append(m.kids, sampledChild{n, pss})
			}
		} else if r, err := m.rd.Rollup(pr.pid); err == nil {
			m.kids = append(m.kids, sampledChild{n, r.PSS})
		}
	}
	kids := m.kids
	defer clear(m.kids)
	if p.Usage != nil {
		if total, err = p.Usage(); err != nil {
			return err
		}
	}
	if p.Observe != nil {
		p.Observe(total, me.RSS)
	}
	pressure := p.Limit > 0 && total+p.ChildCost > p.Limit
	var worst *sampledChild
	var worstShare, worstOver uint64
	var fair uint64
	if p.FairShare && pressure && len(kids) > 0 && p.Limit > me.RSS {
		fair = (p.Limit - me.RSS) / uint64(len(kids))
	}
	for i := range kids {
		k := &kids[i]
		if p.ChildLimit > 0 && k.pss > p.ChildLimit {
			s.overMemory(k.n, fmt.Sprintf("memory exceeded: its PSS of %d MiB passed its limit of %d MiB", k.pss>>20, p.ChildLimit>>20), p.Log)
			continue
		}
		if !pressure {
			continue
		}
		share := p.ChildCost + p.ChildFactor*uint64(k.n.encodedSize())
		if fair > 0 {
			share = min(share, fair)
		}
		if k.pss > share && k.pss-share > worstOver {
			worst, worstShare, worstOver = k, share, k.pss-share
		}
	}
	if worst != nil {
		s.overMemory(worst.n, fmt.Sprintf("memory exceeded: the pod held %d of its %d MiB and this child, %d MiB, was the furthest over its share of %d MiB",
			total>>20, p.Limit>>20, worst.pss>>20, worstShare>>20), p.Log)
	}
	return nil
}

// encodedSize is n's payload encoded, in bytes (computed once).
func (n *node) encodedSize() int64 {
	if v := n.payloadBytes.Load(); v > 0 {
		return v
	}
	n.mu.Lock() // leaveObjective changes the payload
	size, err := jsonSize(&n.payload)
	n.mu.Unlock()
	if err != nil {
		return 0
	}
	n.payloadBytes.Store(size)
	return size
}

// jsonSize is len(json.Marshal(v)), counted as it is encoded rather than
// kept: a payload's objective may be tens of KB, and the supervisor measures
// every payload it hands over (issue 35).
func jsonSize(v any) (int64, error) {
	var c byteCount
	if err := json.NewEncoder(&c).Encode(v); err != nil {
		return 0, err
	}
	return int64(c) - 1, nil // Encode's newline
}

// byteCount is an io.Writer that counts what is written to it.
type byteCount int64

func (c *byteCount) Write(p []byte) (int, error) {
	*c += byteCount(len(p))
	return len(p), nil
}

// overMemory stops n for the memory policy: crashed, memory_exceeded, at once.
func (s *Supervisor) overMemory(n *node, detail string, log *slog.Logger) {
	in := n.info()
	log.Warn("memory policy: stopping a child", "run_id", in.RunID, "agent_path", in.AgentPath, "pid", in.PID, "cause", api.CauseMemoryExceeded, "detail", detail)
	s.killAtOnce(n, verdict{status: api.StatusCrashed, cause: api.CauseMemoryExceeded, detail: detail}, "memory exceeded")
}
