package supervisor

import (
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/testkit"
)

// The service-wide process bound reaches into a tree: with three slots, the
// root's (held by its run, as admission holds it) and two async children's,
// a third child is refused as a tool result, at once; once the two are
// reaped their slots are free again and a spawn passes. No slot leaks.
func TestNestedSpawnRefusedAtServiceCapacity(t *testing.T) {
	budget, err := admit.New(admit.Config{Bounds: admit.Bounds{MaxRuns: 1, MaxLive: 3}})
	if err != nil {
		t.Fatal(err)
	}
	s, rec := newNestingSupervisor(t, func(c *Config) { c.Budget = budget })
	run, err := budget.Enqueue("test", admit.Normal) // the root's slot
	if err != nil {
		t.Fatal(err)
	}
	defer run.Done()
	g := newGate(t)
	go func() { // the two children finish only once the third was refused
		// Not WaitFor: its Fatalf may not run on this goroutine.
		if !testkit.Poll(10*time.Second, func() bool { return strings.Contains(rec.logs.String(), refuseCapacity) }) {
			t.Errorf("the third spawn not refused (%q) within 10s", refuseCapacity)
		}
		g.open(t)
	}()
	hold := spawnCall(prog{WaitFile: string(g), Answer: "held"}, api.DispositionAsync)
	_, res := runProg(t, s, prog{Calls: []progCall{
		hold, hold, // 0, 1: the two free slots
		spawnCall(prog{Answer: "third"}, api.DispositionSync),  // 2: refused
		onHandle(api.ToolAwait, 0), onHandle(api.ToolAwait, 1), // 3, 4
		spawnCall(prog{Answer: "after"}, api.DispositionSync), // 5: passes
	}})
	if res.Status != api.StatusCompleted {
		t.Fatalf("root: %+v", res)
	}
	rs := report(t, res).Results
	if r := rs[2]; !r.IsError || r.Text != "spawn denied: service at capacity" {
		t.Fatalf("third spawn: %+v, want the capacity refusal", r)
	}
	for _, i := range []int{3, 4, 5} {
		if cr := childReportOf(t, rs[i]); cr.Status != api.StatusCompleted {
			t.Fatalf("result %d: %+v", i, cr)
		}
	}
	if got := s.Stats().Refusals[ReasonServiceCapacity]; got != 1 {
		t.Errorf("service_capacity refusals = %d, want 1", got)
	}
	if n := len(rec.startedPaths()); n != 4 {
		t.Errorf("%d subagents started, want the root and 3 children", n)
	}
	st := budget.Stats()
	if st.Live != 1 || st.Refused != 1 {
		t.Fatalf("budget after the tree: %d slots in use (want the run's 1), %d refused (want 1)", st.Live, st.Refused)
	}
}

// A remote child runs no process here and takes no slot.
func TestRemoteChildTakesNoSlot(t *testing.T) {
	budget, err := admit.New(admit.Config{Bounds: admit.Bounds{MaxRuns: 1, MaxLive: 1}})
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDelegator{}
	s, _ := newNestingSupervisor(t, func(c *Config) { c.Budget = budget; c.Delegator = d })
	run, err := budget.Enqueue("test", admit.Normal)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Done()
	_, res := runProg(t, s, prog{Calls: []progCall{
		spawnCall(prog{Answer: "local"}, api.DispositionSync),
		spawnCall(prog{Answer: "remote"}, api.DispositionSync, func(a *api.SpawnArgs) { a.Provider = "peer:echo" }),
	}})
	rs := report(t, res).Results
	if r := rs[0]; !r.IsError || r.Text != refuseCapacity {
		t.Fatalf("local spawn with no slot: %+v", r)
	}
	if cr := childReportOf(t, rs[1]); cr.Status != api.StatusCompleted {
		t.Fatalf("remote spawn: %+v", cr)
	}
}

// An exec child is a process too: it takes a slot of the service-wide bound
// and gives it back at its reap.
func TestExecTakesASlot(t *testing.T) {
	budget, err := admit.New(admit.Config{Bounds: admit.Bounds{MaxRuns: 1, MaxLive: 2}})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newNestingSupervisor(t, allowExec, func(c *Config) { c.Budget = budget })
	run, err := budget.Enqueue("test", admit.Normal)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Done()
	hold := spawnCall(prog{Hold: true}, api.DispositionAsync) // holds the second slot until cancelled
	_, res := runProg(t, s, prog{Calls: []progCall{
		hold,
		execCall([]string{"true"}), // refused: no slot
		onHandle(api.ToolCancel, 0),
		onHandle(api.ToolAwait, 0),
		execCall([]string{"true"}), // the child is reaped: its slot is free
	}}, withExec)
	rs := report(t, res).Results
	if r := rs[1]; !r.IsError || r.Text != "exec denied: service at capacity" {
		t.Fatalf("exec with no slot: %+v", r)
	}
	if er := execResultOf(t, rs[4]); er.Status != api.StatusCompleted {
		t.Fatalf("exec after the slot was freed: %+v", er)
	}
	if got := s.Stats().Refusals[ReasonServiceCapacity]; got != 1 {
		t.Errorf("service_capacity refusals = %d, want 1", got)
	}
	if st := budget.Stats(); st.Live != 1 {
		t.Fatalf("slots in use after the tree: %d, want the run's 1", st.Live)
	}
}
