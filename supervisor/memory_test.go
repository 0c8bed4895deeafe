package supervisor

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/memlimit"
	"github.com/agentd/agentd/internal/testkit"
)

// growing returns a supervisor whose children hold mib MiB of heap.
func growing(t *testing.T, mib int) *Supervisor {
	t.Helper()
	s, _ := newSupervisor(t, "grow", func(c *Config) {
		c.Env = append(c.Env, envGrow+"="+strconv.Itoa(mib<<20))
	})
	return s
}

// watch runs the memory watch with p until the test ends.
func watch(t *testing.T, s *Supervisor, p MemoryPolicy) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.WatchMemory(ctx, p) }()
	t.Cleanup(func() { cancel(); <-done })
}

// A child whose PSS passes its own limit is the one the memory policy stops:
// crashed, memory_exceeded, in its own result.
func TestMemoryPolicyChildLimit(t *testing.T) {
	s := growing(t, 64)
	var samples atomic.Int64
	watch(t, s, MemoryPolicy{Interval: 10 * time.Millisecond, ChildLimit: 32 << 20, Observe: func(total, self uint64) {
		if total > self {
			samples.Add(1)
		}
	}})
	r := start(t, s, testPayload("grow", time.Minute))
	res := result(t, r, 30*time.Second)
	if res.Status != api.StatusCrashed || res.Cause != api.CauseMemoryExceeded || !strings.Contains(res.Detail, "limit of 32 MiB") {
		t.Fatalf("result = %+v, want crashed with cause %s", res, api.CauseMemoryExceeded)
	}
	if samples.Load() == 0 {
		t.Fatal("no sample counted a child beside the supervisor")
	}
	wantVerdicts(t, s, map[string]int64{api.CauseMemoryExceeded: 1})
}

// Under pressure (the pod within one child's cost of its limit) the largest
// child over its share is stopped, and a child within its share is not.
func TestMemoryPolicyPressure(t *testing.T) {
	s := growing(t, 48)
	r := start(t, s, testPayload("grow", time.Minute))
	pid := waitPID(t, r)
	var pss uint64
	testkit.WaitFor(t, 20*time.Second, "the child to grow", func() bool {
		ru, err := memlimit.ReadRollup(pid)
		pss = ru.PSS
		return err == nil && ru.PSS > 40<<20
	})
	// A share above the child's size: no act, whatever the pressure (and the
	// share counts the payload's bytes: 1 MiB a child and 1 MiB a byte is
	// above it too).
	quiet := &atomic.Int64{}
	var m memSampler
	for _, p := range []MemoryPolicy{{Limit: 1, ChildCost: 64 << 20}, {Limit: 1, ChildCost: 1 << 20, ChildFactor: 1 << 20}, {Limit: 1 << 40, ChildCost: 1 << 20}} {
		p.Log, p.Observe = s.log, func(uint64, uint64) { quiet.Add(1) }
		if err := s.sampleMemory(p, &m); err != nil {
			t.Fatal(err)
		}
	}
	if isDone(r) || quiet.Load() != 3 {
		t.Fatalf("a child within its share was stopped (done %v) or samples were missed (%d)", isDone(r), quiet.Load())
	}
	// The pod (the process tree, whose read gives each child's PSS too) at
	// its limit, the child over a 16 MiB share: it is stopped.
	watch(t, s, MemoryPolicy{Interval: 10 * time.Millisecond, ChildCost: 16 << 20, Limit: 1})
	res := result(t, r, 30*time.Second)
	if res.Status != api.StatusCrashed || res.Cause != api.CauseMemoryExceeded || !strings.Contains(res.Detail, "furthest over its share of 16 MiB") {
		t.Fatalf("result = %+v (child PSS %d MiB), want crashed with cause %s", res, pss>>20, api.CauseMemoryExceeded)
	}
}

// With FairShare, under pressure a child within its run's share but over
// what the limit holds for each live child is the one stopped: children
// admitted past the count bounds that all grow cannot take the pod past
// its limit with none over its share. Without it, the same child is left.
func TestMemoryPolicyFairShare(t *testing.T) {
	s := growing(t, 48)
	r := start(t, s, testPayload("grow", time.Minute))
	pid := waitPID(t, r)
	testkit.WaitFor(t, 20*time.Second, "the child to grow", func() bool {
		ru, err := memlimit.ReadRollup(pid)
		return err == nil && ru.PSS > 40<<20
	})
	me, err := memlimit.ReadRollup(0)
	if err != nil {
		t.Fatal(err)
	}
	// The pod at its limit; the child's run share (64 MiB) is above it, its
	// fair share (the limit less the supervisor's RSS: 16 MiB) below.
	limit := me.RSS + 16<<20
	p := MemoryPolicy{Limit: limit, ChildCost: 64 << 20, Usage: func() (uint64, error) { return limit, nil }, Log: s.log}
	if err := s.sampleMemory(p, &memSampler{}); err != nil {
		t.Fatal(err)
	}
	if isDone(r) {
		t.Fatal("a child within its run's share was stopped without FairShare")
	}
	p.Interval, p.FairShare = 10*time.Millisecond, true
	watch(t, s, p)
	res := result(t, r, 30*time.Second)
	if res.Status != api.StatusCrashed || res.Cause != api.CauseMemoryExceeded {
		t.Fatalf("result = %+v, want crashed with cause %s", res, api.CauseMemoryExceeded)
	}
}

// A sample reads each child's memory once, at the cost of its path: each
// further child of the process (here a sleep, no node of the tree) adds
// about one allocation to a sample of the process tree. It added about a
// dozen, twice for a node's child, when each read went through os.ReadFile
// and a line scanner, which made the memory watch most of what the
// supervisor allocated while its children waited on their models.
func TestSampleMemoryAllocsPerChild(t *testing.T) {
	s := growing(t, 1)
	p := MemoryPolicy{Log: s.log, Limit: 1 << 40, ChildCost: 1 << 20, Observe: func(total, self uint64) {}}
	var m memSampler
	sample := func() {
		if err := s.sampleMemory(p, &m); err != nil {
			t.Fatal(err)
		}
	}
	sample()
	before := testing.AllocsPerRun(20, sample)
	const extra = 8
	for range extra {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Skipf("no sleep binary to be a child: %v", err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	sample()
	after := testing.AllocsPerRun(20, sample)
	if per := (after - before) / extra; per > 1.5 {
		t.Fatalf("a sample allocates %.1f more times a child (%.0f with %d more children, %.0f before), want about 1", per, after, extra, before)
	}
}
