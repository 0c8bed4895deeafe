package admit

import "fmt"

// Memory figures of the derivation (see Derive), measured on agentd's own
// binary (docs/performance.md, figure 9; docs/admission.md). The pod row of
// figure 9 runs `agentd serve` as deployed in a real 1 GiB memory cgroup
// (the default warm pool, the default store) and fills it with subagents in
// a model call carrying a 64 KiB conversation and a 16 KiB tool result: the
// cgroup's working set over the subagents it held is what one costs all in
// (its child's private memory, the supervisor's share, the kernel's page
// tables and stacks, the store's page cache): 2.8 to 2.9 MiB since session
// 5's cuts (3.4 to 3.5 after session 4's, 4.3 to 4.5 before). The binary's
// text is shared page cache, charged once.
const (
	MiB = 1 << 20

	// ChildCost is the figure a default bound assumes per live subagent:
	// what one costs all in when the pod is full of them (figure 9's pod
	// row, 2.8 to 2.9 MiB), with a margin of about 8% for a child at its
	// peak (the row's children are at theirs, waiting in a model call with
	// their whole conversation; the memory gate, which measures, stops
	// admission before the limit whatever a child turns out to cost):
	// 3 MiB and 128 KiB. Children measured smaller are admitted past the
	// bound by the memory gate (MemoryConfig.Beyond); a child carrying a
	// large message costs more: MessageChildFactor.
	ChildCost = 3*MiB + 128<<10
	// ChildFloor is the ceiling's figure per subagent: the idle child's
	// marginal cost (1.9 MiB private, 2.1 for the pool's next child in
	// line; its page tables and kernel stacks, about 0.3 MiB; the
	// supervisor's share), rounded up. More children than the ceiling
	// allows would not fit in the limit even idle.
	ChildFloor = 2*MiB + 512<<10
	// BaseMin and BaseShare set what the bounds keep for the supervisor
	// with no child, max(BaseMin, limit/BaseShare): its idle RSS (22 to 28
	// MiB), its store's page caches (SQLite's 2.8 MiB, about twice that of
	// C heap) and the store's files in the page cache (23 MiB active with
	// 200 runs of figure 9).
	// What it holds per live child is in ChildCost.
	BaseMin   = 64 * MiB
	BaseShare = 16
	// ReserveMin and ReserveShare set the supervisor's share of the limit,
	// max(ReserveMin, limit/ReserveShare): its Go memory limit and the
	// task and blob stores' default budgets are derived from it.
	ReserveMin   = 96 * MiB
	ReserveShare = 4
	// CeilingReserve is the supervisor's floor in the ceiling's formula: its
	// idle RSS (24 MiB) with room to serve.
	CeilingReserve = 64 * MiB

	// MaxLiveCap and CeilingLiveCap bound the derived figures on large
	// machines, where memory stops being what limits a supervisor (threads,
	// fds and CPU do).
	MaxLiveCap     = 1024
	CeilingLiveCap = 4096
	// QueuePerRun and CeilingQueuePerRun size the queue (per default run): a
	// queued run holds no process, only its task.
	QueuePerRun        = 4
	CeilingQueuePerRun = 16
)

// Derived is what Derive computes: the default bounds, their hard ceiling,
// and the figures they come from.
type Derived struct {
	Bounds
	Ceiling Bounds
	Limit   uint64 // the memory limit the derivation started from
	Base    uint64 // kept for the supervisor with no child
	Reserve uint64 // the supervisor's share: its Go memory limit and its stores' budgets
	Pool    int    // warm-pool children set aside
}

// String shows the derivation for the log and `agentd serve --help`.
func (d Derived) String() string {
	return fmt.Sprintf("limit %d MiB, base %d MiB, warm pool %d: max_live_runs %d, max_live_subagents %d, queue_capacity %d (ceilings %d, %d, %d)",
		d.Limit/MiB, d.Base/MiB, d.Pool, d.MaxRuns, d.MaxLive, d.QueueCapacity, d.Ceiling.MaxRuns, d.Ceiling.MaxLive, d.Ceiling.QueueCapacity)
}

// Derive computes the admission bounds for a memory limit (bytes) and a warm
// pool of pool children (which are processes too, outside the bounds):
//
//	base               = max(BaseMin, limit/BaseShare)
//	max_live_subagents = (limit - base - pool*ChildCost) / ChildCost             (at least 1, at most MaxLiveCap)
//	max_live_runs      = max_live_subagents / 2                                  (at least 1: room for one nested child per run)
//	queue_capacity     = QueuePerRun * max_live_runs
//
// and the ceilings an operator may raise them to:
//
//	ceiling_live       = (limit - CeilingReserve - pool*ChildFloor) / ChildFloor (at most CeilingLiveCap, at least max_live_subagents)
//	ceiling_runs       = ceiling_live
//	ceiling_queue      = CeilingQueuePerRun * max_live_runs
//
// The divisions round down, and a limit below what is subtracted from it
// leaves 0 (then the "at least" applies). For a 1 GiB pod with the default
// warm pool of 2: base 64 MiB, max_live_subagents (1024-64-8)/4 = 238,
// max_live_runs 119, queue_capacity 476; ceilings 318 live, 318 runs, 1904
// queued. The supervisor's share (its Go memory limit, its stores'
// budgets) is max(ReserveMin, limit/ReserveShare): 256 MiB of 1 GiB.
func Derive(limit uint64, pool int) Derived {
	pool = max(pool, 0)
	base := max(uint64(BaseMin), limit/BaseShare)
	avail := func(reserve, per uint64) int {
		need := reserve + uint64(pool)*per
		if limit <= need {
			return 0
		}
		return int((limit - need) / per)
	}
	live := min(max(avail(base, ChildCost), 1), MaxLiveCap)
	runs := max(live/2, 1)
	ceilLive := max(min(avail(CeilingReserve, ChildFloor), CeilingLiveCap), live)
	return Derived{
		Bounds:  Bounds{MaxRuns: runs, MaxLive: live, QueueCapacity: QueuePerRun * runs},
		Ceiling: Bounds{MaxRuns: ceilLive, MaxLive: ceilLive, QueueCapacity: CeilingQueuePerRun * runs},
		Limit:   limit,
		Base:    base,
		Reserve: max(uint64(ReserveMin), limit/ReserveShare),
		Pool:    pool,
	}
}

// Resolve applies explicit settings (0: derived; a negative queue: none)
// over the derived bounds and checks them: each within its ceiling, and the bounds consistent. Name is
// the bound's snake_case name in a *CeilingError.
func (d Derived) Resolve(maxRuns, maxLive, queue int) (Bounds, error) {
	b := d.Bounds
	if maxLive > 0 {
		b.MaxLive = maxLive
		if maxRuns == 0 {
			b.MaxRuns = min(b.MaxRuns, maxLive) // a lowered process bound lowers the derived runs with it
		}
	}
	if maxRuns > 0 {
		b.MaxRuns = maxRuns
		if maxLive == 0 && b.MaxLive < maxRuns {
			b.MaxLive = min(maxRuns, d.Ceiling.MaxLive)
		}
	}
	switch {
	case queue > 0:
		b.QueueCapacity = queue
	case queue < 0:
		b.QueueCapacity = 0
	}
	if err := b.within(d.Ceiling); err != nil {
		return Bounds{}, err
	}
	if err := b.Validate(); err != nil {
		return Bounds{}, err
	}
	return b, nil
}
