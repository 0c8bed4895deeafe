package server

import (
	"encoding/json"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/supervisor"
)

// a2a.Caps reads and adjusts the admission bounds within their ceilings; a
// refused value changes nothing, the chokepoint caps of the same call
// included. a2a.Tree shows the same gauges.
func TestOperatorAdmissionBounds(t *testing.T) {
	op, call := operatorHandler(t)
	ctrl, err := admit.New(admit.Config{
		Bounds:  admit.Bounds{MaxRuns: 4, MaxLive: 8, QueueCapacity: 16},
		Ceiling: admit.Bounds{MaxRuns: 20, MaxLive: 40, QueueCapacity: 64},
	})
	if err != nil {
		t.Fatal(err)
	}
	op.Admission = ctrl
	busy, _ := ctrl.Enqueue("spiffe://td/a", admit.Normal)
	defer busy.Done()

	caps := func(params string) (api.CapsResult, *RPCError) {
		t.Helper()
		r := call(api.OpCaps, params)
		var c api.CapsResult
		if r.Error == nil {
			if err := json.Unmarshal(r.Result, &c); err != nil {
				t.Fatal(err)
			}
		}
		return c, r.Error
	}
	c, rerr := caps("")
	if rerr != nil || c.Admission == nil {
		t.Fatalf("read: %+v %+v", rerr, c)
	}
	a := c.Admission
	if a.MaxRuns != 4 || a.MaxLiveSubagents != 8 || a.QueueCapacity != 16 || a.Ceiling != (api.AdmissionBounds{MaxRuns: 20, MaxLiveSubagents: 40, QueueCapacity: 64}) ||
		a.Runs != 1 || a.Slots != 1 || a.LiveProcesses != 0 || a.Shed[admit.ReasonQueueFull] != 0 || a.QueuedByPriority["high"] != 0 {
		t.Fatalf("admission read: %+v", a)
	}
	for _, bad := range []string{
		`{"max_live_runs":21}`,                       // over its ceiling
		`{"max_live_subagents":41}`,                  // over its ceiling
		`{"queue_capacity":-1}`,                      // negative
		`{"max_live_runs":0}`,                        // below 1
		`{"max_live_runs":9}`,                        // above max_live_subagents (8)
		`{"max_live_runs":5,"max_depth":0}`,          // a bad cap in the same call
		`{"max_depth":3,"queue_capacity":65}`,        // a bad bound in the same call
		`{"max_live_subagents":"lots"}`,              // not a number
		`{"max_live_subagents":2,"max_live_runs":3}`, // inconsistent together
	} {
		if _, rerr := caps(bad); rerr == nil || rerr.Code != CodeInvalidParams {
			t.Errorf("%s: %+v, want -32602", bad, rerr)
		}
	}
	if cur, _ := ctrl.Bounds(); cur != (admit.Bounds{MaxRuns: 4, MaxLive: 8, QueueCapacity: 16}) || op.Sup.Caps().MaxDepth != supervisor.DefaultCaps.MaxDepth {
		t.Fatalf("refused calls changed the bounds %+v or the caps %+v", cur, op.Sup.Caps())
	}
	c, rerr = caps(`{"max_live_runs":10,"max_live_subagents":40,"queue_capacity":0,"max_depth":3}`)
	if rerr != nil || c.MaxDepth != 3 || c.Admission.MaxRuns != 10 || c.Admission.MaxLiveSubagents != 40 || c.Admission.QueueCapacity != 0 {
		t.Fatalf("set: %+v %+v", rerr, c.Admission)
	}
	if cur, _ := ctrl.Bounds(); cur != (admit.Bounds{MaxRuns: 10, MaxLive: 40, QueueCapacity: 0}) {
		t.Fatalf("controller bounds %+v", cur)
	}

	var tr api.TreeResult
	r := call(api.OpTree, "")
	if r.Error != nil || json.Unmarshal(r.Result, &tr) != nil || tr.Admission == nil || tr.Admission.MaxRuns != 10 || tr.Admission.Runs != 1 || tr.Breakers == nil {
		t.Fatalf("tree: %+v %s", r.Error, r.Result)
	}
}

// Without admission control a2a.Caps refuses the admission fields and shows
// none.
func TestOperatorCapsWithoutAdmission(t *testing.T) {
	_, call := operatorHandler(t)
	if r := call(api.OpCaps, `{"max_live_runs":2}`); r.Error == nil || r.Error.Code != CodeInvalidParams {
		t.Fatalf("max_live_runs without admission: %+v", r.Error)
	}
	r := call(api.OpCaps, "")
	var c api.CapsResult
	if r.Error != nil || json.Unmarshal(r.Result, &c) != nil || c.Admission != nil {
		t.Fatalf("read: %+v %s", r.Error, r.Result)
	}
}

// a2a.Tree shows the restart breakers with their state and next trial;
// a2a.CloseBreaker closes the warm pool's by its key, and says so.
func TestOperatorCloseBreaker(t *testing.T) {
	op, call := operatorHandler(t)
	g := op.Sup.Governor()
	for i := 0; i < 2; i++ {
		g.Record(supervisor.PoolKey, supervisor.OutcomeCrashBeforeReady)
	}
	var tr api.TreeResult
	r := call(api.OpTree, "")
	if r.Error != nil || json.Unmarshal(r.Result, &tr) != nil || len(tr.Breakers) != 1 {
		t.Fatalf("tree: %+v %s", r.Error, r.Result)
	}
	b := tr.Breakers[0]
	if b.Key != supervisor.PoolKey || b.State != api.BreakerOpen || b.Since == nil || b.NextTrial == nil || !b.NextTrial.After(*b.Since) || b.Openings != 1 || b.Failures != 6 {
		t.Fatalf("open breaker in the tree: %+v", b)
	}
	if r := call(api.OpCloseBreaker, ""); r.Error == nil || r.Error.Code != CodeInvalidParams {
		t.Fatalf("no key: %+v, want -32602", r.Error)
	}
	var res api.CloseBreakerResult
	r = call(api.OpCloseBreaker, `{"key":"warm-pool"}`)
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil {
		t.Fatalf("close: %+v %s", r.Error, r.Result)
	}
	if res.Key != supervisor.PoolKey || !res.Known || !res.WasOpen || res.Was != api.BreakerOpen || b.OpenedAt == nil || res.Breaker.State != api.BreakerClosed || res.Breaker.NextTrial != nil || res.Breaker.Failures != 0 {
		t.Fatalf("close result: %+v", res)
	}
	if _, err := g.Allow(supervisor.PoolKey); err != nil {
		t.Fatalf("after a2a.CloseBreaker the pool may not refill: %v", err)
	}
	r = call(api.OpCloseBreaker, `{"key":"nope"}`)
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.Known || res.Key != "nope" || res.WasOpen || res.Was != api.BreakerClosed {
		t.Fatalf("unknown key: %+v %+v", r.Error, res)
	}
	if r := call(api.OpCloseBreaker, `{"key":3}`); r.Error == nil || r.Error.Code != CodeInvalidParams {
		t.Fatalf("bad params: %+v", r.Error)
	}
}
