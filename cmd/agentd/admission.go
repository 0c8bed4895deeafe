package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/memlimit"
	"github.com/agentd/agentd/supervisor"
)

// admissionConfig is serve's admission control: the bounds on runs and on
// live subagent processes across the service (0: derived from the memory
// limit, see admit.Derive), the queue beyond them, and the priority caps.
type admissionConfig struct {
	MaxRuns       int
	MaxLive       int
	QueueCapacity int    // 0: derived; -1: no queue
	MemoryLimit   string // a size; "0": the limit this process runs under
	PriorityCaps  string
	// SampleInterval is how often the memory in use is sampled (the memory
	// gate and the per-child policy).
	SampleInterval time.Duration
	// ChildMemory is the PSS a child may reach before the memory policy
	// stops it (a size; "0": derived, see childMemory).
	ChildMemory string
}

func addAdmission(f *cli.Flags, c *admissionConfig) {
	f.EnvInt(&c.MaxRuns, "max-live-runs", "AGENT_MAX_LIVE_RUNS", 0, "runs (live subagent trees) at once across the service; 0 derives it from the memory limit")
	f.EnvInt(&c.MaxLive, "max-live-subagents", "AGENT_MAX_LIVE_SUBAGENTS", 0, "live subagent processes across the service, every run's root included; a nested spawn past it is refused; 0 derives it from the memory limit")
	f.EnvInt(&c.QueueCapacity, "queue-capacity", "AGENT_QUEUE_CAPACITY", 0, "runs that may wait for a slot (a caller at most half of them); past it a send is answered 429 with Retry-After; 0 derives it, -1 queues none")
	f.EnvString(&c.MemoryLimit, "memory-limit", "AGENT_MEMORY_LIMIT", "0", "the memory the default bounds are derived from, e.g. 1GiB, at most the limit this process runs under; 0 is that limit (cgroup v2 memory.max, cgroup v1 memory.limit_in_bytes, else the machine's memory)")
	f.EnvDuration(&c.SampleInterval, "memory-sample-interval", "AGENT_MEMORY_SAMPLE_INTERVAL", 250*time.Millisecond, "how often the memory in use (the cgroup's working set, else the supervisor's RSS plus its children's PSS) is sampled for admission and the per-child memory policy")
	f.EnvString(&c.ChildMemory, "child-memory", "AGENT_CHILD_MEMORY", "0", "the PSS a subagent process may reach before it is stopped (crashed, cause memory_exceeded); 0 derives it: twice the admission's cost of a child plus 12 times --max-message")
	f.EnvString(&c.PriorityCaps, "priority-caps", "AGENT_PRIORITY_CAPS", admit.DefaultPolicy, "the highest priority (low, normal, high; asked with message metadata agentd/priority) each caller may have: peer=P, operator=P, and CALLER=P for a SPIFFE ID, token:NAME or anonymous")
}

// validate checks the settings on their own; the derived bounds and their
// ceilings are checked when the service is built, once the memory limit is
// read.
func (c *admissionConfig) validate() error {
	if c.MaxRuns < 0 {
		return fmt.Errorf("--max-live-runs must not be negative (got %d; 0 derives it)", c.MaxRuns)
	}
	if c.MaxLive < 0 {
		return fmt.Errorf("--max-live-subagents must not be negative (got %d; 0 derives it)", c.MaxLive)
	}
	if c.QueueCapacity < -1 {
		return fmt.Errorf("--queue-capacity must be -1 (no queue), 0 (derived) or positive (got %d)", c.QueueCapacity)
	}
	if c.MaxRuns > 0 && c.MaxLive > 0 && c.MaxRuns > c.MaxLive {
		return fmt.Errorf("--max-live-runs %d exceeds --max-live-subagents %d: every run holds a process slot for its root", c.MaxRuns, c.MaxLive)
	}
	if _, err := parseSize(c.MemoryLimit); err != nil {
		return fmt.Errorf("--memory-limit: %v", err)
	}
	if c.SampleInterval < minSampleInterval || c.SampleInterval > maxSampleInterval {
		return fmt.Errorf("--memory-sample-interval must be in [%s, %s] (got %s)", minSampleInterval, maxSampleInterval, c.SampleInterval)
	}
	if n, err := parseSize(c.ChildMemory); err != nil {
		return fmt.Errorf("--child-memory: %v", err)
	} else if n != 0 && n < admit.ChildCost {
		return fmt.Errorf("--child-memory %s is below the cost admission assumes of a child (%s): every child would be stopped (0 derives it)", c.ChildMemory, formatSize(admit.ChildCost))
	}
	if _, err := admit.ParsePolicy(c.PriorityCaps); err != nil {
		return fmt.Errorf("--priority-caps: %v", err)
	}
	return nil
}

// admission is the admission control a build made, with the figures it was
// derived from.
type admission struct {
	ctrl    *admit.Controller
	policy  admit.Policy
	derived admit.Derived
	limit   memlimit.Limit
	budget  uint64 // the memory limit admission holds the pod to
	// goLimit is the Go memory limit set for the supervisor (its share,
	// derived.Reserve), or -1 when GOMEMLIMIT set one.
	goLimit int64
}

// The memory sample interval's range: a sample reads a file per child, so
// not much more often; and rarely enough lets a pod grow unseen.
const (
	minSampleInterval = 10 * time.Millisecond
	maxSampleInterval = 10 * time.Second
)

// openAdmission reads the memory limit, derives the bounds for it and a warm
// pool of pool, applies the explicit settings over them and builds the
// controller. A setting above its ceiling is bad config.
func openAdmission(c *admissionConfig, pool int, log *slog.Logger) (*admission, error) {
	found, err := memlimit.Read()
	if err != nil {
		return nil, fmt.Errorf("read the memory limit: %w", err)
	}
	budget := found.Bytes
	if asked, _ := parseSize(c.MemoryLimit); asked > 0 { // checked by validate
		if asked > found.Bytes {
			return nil, cli.UsageError("--memory-limit %s is above the limit this process runs under (%s): it may only lower it", mebibytes(asked), found)
		}
		budget = asked
	}
	d := admit.Derive(budget, pool)
	b, err := d.Resolve(c.MaxRuns, c.MaxLive, c.QueueCapacity)
	if err != nil {
		return nil, cli.UsageError("%s (%s)", flagError(err), d)
	}
	// Derived bounds are what a child's measured peak allows: children
	// measured smaller are admitted past them, up to the ceiling, while the
	// memory in use leaves room (admission.md, "The memory gate"). A bound
	// the operator set is kept as set.
	mem := admit.MemoryConfig{Limit: budget, Beyond: c.MaxRuns == 0 && c.MaxLive == 0}
	ctrl, err := admit.New(admit.Config{Bounds: b, Ceiling: d.Ceiling, Memory: mem})
	if err != nil {
		return nil, cli.UsageError("%v", err)
	}
	policy, _ := admit.ParsePolicy(c.PriorityCaps) // checked by validate
	log.Info("admission", "memory_limit", mebibytes(budget), "found", found.String(), "base", mebibytes(d.Base), "reserve", mebibytes(d.Reserve),
		"max_live_runs", b.MaxRuns, "max_live_subagents", b.MaxLive, "queue_capacity", b.QueueCapacity,
		"ceiling_max_live_runs", d.Ceiling.MaxRuns, "ceiling_max_live_subagents", d.Ceiling.MaxLive, "ceiling_queue_capacity", d.Ceiling.QueueCapacity,
		"priority_caps", policy.String())
	// The supervisor's Go heap is held to its share of the limit (the
	// reserve): past it the collector works harder and returns memory to the
	// system, rather than let the heap double (GOGC) into the children's.
	goLimit := int64(-1)
	if os.Getenv("GOMEMLIMIT") == "" {
		goLimit = int64(d.Reserve)
		debug.SetMemoryLimit(goLimit)
	}
	ms := ctrl.MemoryStats()
	log.Info("memory", "gate_limit_mib", ms.Limit>>20, "go_memory_limit_mib", goLimit>>20, "child_cost_kib", admit.ChildCost>>10,
		"beyond_bounds", mem.Beyond, "headroom_mib", ms.Headroom>>20,
		"sample_interval", c.SampleInterval.String(), "source", memorySource(found))
	return &admission{ctrl: ctrl, policy: policy, derived: d, limit: found, budget: budget, goLimit: goLimit}, nil
}

// memorySource names what the memory sample reads: the cgroup whose limit
// binds, else the process tree.
func memorySource(l memlimit.Limit) string {
	if _, ok := memlimit.CgroupUsage("/", l); ok {
		return string(l.Source) + " working set"
	}
	return "process tree (RSS + children's PSS)"
}

// childMemory is the PSS a child may reach before the memory policy stops
// it: --child-memory, or twice what admission reserves for a run with the
// largest message, 2 x (admit.ChildCost + MessageChildFactor x maxMessage):
// a child holds its message and may write an answer as large (builtin:demo
// quoting 3 MB in 3 MB out peaked at 64 MiB of PSS).
func (c *admissionConfig) childMemory(maxMessage uint64) uint64 {
	if n, _ := parseSize(c.ChildMemory); n > 0 { // checked by validate
		return n
	}
	return 2 * (admit.ChildCost + admit.MessageChildFactor*maxMessage)
}

// watchMemory starts the supervisor's memory watch until ctx ends: each
// sample goes to the admission control, and a child over its share is
// stopped (supervisor.MemoryPolicy). It returns the function that waits for
// the watch to end.
func (a *admission) watchMemory(ctx context.Context, sup *supervisor.Supervisor, c *admissionConfig, maxMessage uint64, log *slog.Logger) (wait func()) {
	p := supervisor.MemoryPolicy{
		Interval:   c.SampleInterval,
		ChildLimit: c.childMemory(maxMessage),
		Limit:      a.budget,
		ChildCost:  admit.ChildCost,
		// Past the count bounds the children's shares are what the limit
		// holds for each of them, no more.
		FairShare: a.ctrl.MemoryStats().Headroom > 0,
		// A child's share under pressure: what its run reserved.
		ChildFactor: admit.MessageChildFactor,
		Observe:     func(total, self uint64) { a.ctrl.Observe(admit.Sample{Total: total, Self: self}) },
		Log:         log,
	}
	if read, ok := memlimit.CgroupUsage("/", a.limit); ok {
		p.Usage = read
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sup.WatchMemory(ctx, p)
	}()
	return func() { <-done }
}

// flagError names the flag of a bound that Resolve refused.
func flagError(err error) string {
	flagOf := map[string]string{"max_live_runs": "--max-live-runs", "max_live_subagents": "--max-live-subagents", "queue_capacity": "--queue-capacity"}
	var ce *admit.CeilingError
	if errors.As(err, &ce) {
		return fmt.Sprintf("%s %d is above its ceiling of %d, derived from the memory limit", flagOf[ce.Name], ce.Value, ce.Ceiling)
	}
	return err.Error()
}

// mebibytes shows a size in whole MiB, as the derivation counts.
func mebibytes(n uint64) string { return fmt.Sprintf("%dMiB", n>>20) }
