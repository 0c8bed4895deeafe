package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/supervisor"
)

// Operator serves the a2a.* operator methods over the live supervisor. Its
// fields are set once before Methods is called; it is safe for concurrent use.
type Operator struct {
	Sup      *supervisor.Supervisor
	InFlight func() int // tasks not yet terminal (the engine's InFlight)
	Drain    *Drainer
	LameDuck *LameDuck
	// Admission, if set, is the service's admission control: a2a.Tree and
	// a2a.Caps show it and a2a.Caps adjusts its bounds.
	Admission *admit.Controller
	// Audit, if set, keeps the audit trail: each operator action is
	// appended to it (audit.go) and a2a.Audit reads it. Without it a2a.Audit
	// answers that there is none.
	Audit tasks.Auditor
	// Instance names this replica in the records it appends.
	Instance string
	// Now is the records' clock; default time.Now.
	Now func() time.Time
	// Log receives a warning for a record the store refused; nil discards.
	Log *slog.Logger
	// Tasks, if set, is the task engine whose waiting tasks a2a.Questions
	// lists and a2a.Answer answers; without it they answer that there is
	// none.
	Tasks *tasks.Engine
	// InputTimeout is the service's --input-timeout (0: none), for the
	// deadline a2a.Questions shows.
	InputTimeout time.Duration
}

// Methods returns the operator methods by name, for Config.Methods.
// Each call that acts is appended to Audit (audit.go).
func (o *Operator) Methods() map[string]Method {
	m := map[string]Method{
		api.OpDrain:    o.drain,
		api.OpLameDuck: o.lameDuck,
		api.OpPause:    o.pause,
		api.OpResume:   o.resume,
		api.OpCancel:   o.cancel,
		api.OpTree:     o.tree,
		api.OpCaps:     o.caps,
		api.OpAudit:    o.audit,

		api.OpCloseBreaker: o.closeBreaker,
		api.OpQuestions:    o.questions,
		api.OpAnswer:       o.answer,
		api.OpSteer:        o.steer,
	}
	for name, f := range m {
		m[name] = o.recorded(name, f)
	}
	return m
}

// decodeOptional decodes params that may be absent (or null) into v, strictly:
// unknown fields and non-objects are -32602.
func decodeOptional(raw json.RawMessage, v any) error { return decodeParams(raw, v, paramsStrict) }

func (o *Operator) inFlight() int {
	if o.InFlight == nil {
		return 0
	}
	return o.InFlight()
}

func (o *Operator) drain(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.DrainParams
	if err := decodeOptional(raw, &p); err != nil {
		return nil, err
	}
	var budget time.Duration
	if p.DeadlineMS != nil {
		ms := *p.DeadlineMS
		if ms <= 0 || ms > api.MaxDeadline.Milliseconds() {
			return nil, invalidParams(fmt.Errorf("deadline_ms must be in (0, %d]", api.MaxDeadline.Milliseconds()))
		}
		budget = time.Duration(ms) * time.Millisecond
	}
	o.Drain.Start(budget)
	_, started, b := o.Drain.State()
	eta := time.Until(started.Add(b))
	if eta < 0 {
		eta = 0
	}
	return api.DrainResult{
		Draining:       true,
		InFlight:       o.inFlight(),
		ETAMS:          eta.Milliseconds(),
		DrainTimeoutMS: b.Milliseconds(),
		StartedAt:      started.UTC(),
	}, nil
}

func (o *Operator) lameDuck(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.LameDuckParams
	if err := decodeOptional(raw, &p); err != nil {
		return nil, err
	}
	want := false
	if p.Ready != nil {
		want = *p.Ready
	}
	ready, since := o.LameDuck.Set(want)
	return api.LameDuckResult{Ready: ready, Since: since.UTC(), InFlight: o.inFlight()}, nil
}

func noParams(raw json.RawMessage) error {
	var p struct{}
	return decodeOptional(raw, &p)
}

func (o *Operator) pause(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.PauseParams
	if err := decodeOptional(raw, &p); err != nil {
		return nil, err
	}
	if p.Handle != "" {
		return o.pauseSubtree(p.Handle, true)
	}
	n := o.Sup.Pause()
	return api.PauseResult{Paused: o.Sup.Paused(), Affected: n}, nil
}

func (o *Operator) resume(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.PauseParams
	if err := decodeOptional(raw, &p); err != nil {
		return nil, err
	}
	if p.Handle != "" {
		return o.pauseSubtree(p.Handle, false)
	}
	n := o.Sup.Resume()
	return api.PauseResult{Paused: o.Sup.Paused(), Affected: n}, nil
}

// pauseSubtree pauses or resumes one subagent's subtree (steer.go's
// sibling: a2a.Pause / a2a.Resume with a handle). Paused reports the
// subtree's state; an unknown or ended handle is -32602.
func (o *Operator) pauseSubtree(handle string, paused bool) (any, error) {
	var n int
	var err error
	if paused {
		n, err = o.Sup.PauseSubtree(handle)
	} else {
		n, err = o.Sup.ResumeSubtree(handle)
	}
	if err != nil {
		return nil, invalidParams(err)
	}
	return api.PauseResult{Paused: o.Sup.PausedHandles()[handle] || o.Sup.Paused(), Affected: n}, nil
}

// steer serves a2a.Steer: a message to a running subagent, any of them.
func (o *Operator) steer(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.SteerParams
	if err := decodeParams(raw, &p, paramsStrict); err != nil {
		return nil, err
	}
	if p.Handle == "" {
		return nil, invalidParams(errors.New("handle is required: the task id of a running subagent (a2a.Tree lists them)"))
	}
	id, _ := IdentityFrom(ctx)
	res, err := o.Sup.Steer(ctx, p.Handle, p.Text, "operator "+auditCaller(id))
	if err != nil {
		return nil, invalidParams(err)
	}
	return res, nil
}

func (o *Operator) cancel(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.CancelParams
	if err := decodeOptional(raw, &p); err != nil {
		return nil, err
	}
	reason := p.Reason
	if reason == "" {
		reason = "operator a2a.Cancel"
	}
	live := o.Sup.Live()
	if p.Handle == "" || p.Handle == api.CancelAll {
		res := api.CancelResult{Handle: api.CancelAll}
		for _, n := range live {
			if n.ParentHandle == "" && o.Sup.Cancel(n.Handle, reason) {
				res.Cancelled = true
			}
		}
		if res.Cancelled {
			res.SubtreeSize = len(live)
		}
		return res, nil
	}
	size := subtreeSize(live, p.Handle)
	res := api.CancelResult{Handle: p.Handle, Cancelled: o.Sup.Cancel(p.Handle, reason)}
	if res.Cancelled {
		res.SubtreeSize = size
	}
	return res, nil
}

// subtreeSize counts handle and its live descendants.
func subtreeSize(live []supervisor.NodeInfo, handle string) int {
	children := map[string][]string{}
	found := false
	for _, n := range live {
		children[n.ParentHandle] = append(children[n.ParentHandle], n.Handle)
		if n.Handle == handle {
			found = true
		}
	}
	if !found {
		return 0
	}
	size := 0
	stack := []string{handle}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		size++
		stack = append(stack, children[h]...)
	}
	return size
}

func (o *Operator) tree(ctx context.Context, raw json.RawMessage) (any, error) {
	if err := noParams(raw); err != nil {
		return nil, err
	}
	res := Tree(o.Sup)
	res.Admission = AdmissionState(o.Admission, o.Sup)
	return res, nil
}

// Tree returns the live forest depth first, each node after its parent,
// siblings by agent path, and the restart breakers.
func Tree(sup *supervisor.Supervisor) api.TreeResult {
	live := sup.Live()
	held := sup.Held()
	paused := sup.Paused()
	subtrees := sup.PausedHandles()
	byParent := map[string][]supervisor.NodeInfo{}
	known := map[string]bool{}
	for _, n := range live {
		known[n.Handle] = true
	}
	for _, n := range live {
		parent := n.ParentHandle
		if !known[parent] {
			parent = "" // its parent already ended: show it as a root
		}
		byParent[parent] = append(byParent[parent], n)
	}
	for _, kids := range byParent {
		sort.Slice(kids, func(i, j int) bool {
			if kids[i].AgentPath != kids[j].AgentPath {
				return kids[i].AgentPath < kids[j].AgentPath
			}
			return kids[i].Handle < kids[j].Handle
		})
	}
	res := api.TreeResult{Paused: paused, Draining: sup.Draining(), Nodes: []api.TreeNode{}, Breakers: Breakers(sup)}
	if ib := sup.IntelligenceBreakers(); len(ib) > 0 {
		res.IntelligenceBreakers = ib
	}
	if pool := sup.Pool(); pool.Size > 0 {
		res.WarmPool = &api.WarmPool{Size: pool.Size, Idle: pool.Idle, Starting: pool.Starting, Assigned: pool.Assigned, Cold: pool.Cold}
	}
	var walk func(parent string)
	walk = func(parent string) {
		for _, n := range byParent[parent] {
			status := n.State
			switch {
			case held[n.Handle]:
				status = api.NodeHeld
			case (paused || subtrees[n.Handle]) && n.State == supervisor.StateRunning:
				status = api.NodePaused
			}
			provider := n.Provider
			if provider == "" {
				provider = "local"
			}
			tn := api.TreeNode{
				AgentPath:    n.AgentPath,
				TaskID:       n.Handle,
				ParentTaskID: n.ParentHandle,
				PID:          n.PID,
				Depth:        n.Depth,
				Status:       status,
				Usage:        n.Usage,
				Deadline:     n.Deadline.UTC(),
				Provider:     provider,
				Kind:         n.Kind,
				MaxTokens:    n.MaxTokens,
				Objective:    clip(n.Objective, api.MaxTreeObjective),
				Disposition:  n.Disposition,
				Health:       string(n.Health),
				MissedPings:  n.MissedPings,
			}
			if !n.LastProgress.IsZero() {
				at := n.LastProgress.UTC()
				tn.LastProgress = &at
			}
			tn.Steerable, tn.NotSteerable = sup.Steerable(n.Handle)
			res.Nodes = append(res.Nodes, tn)
			walk(n.Handle)
		}
	}
	walk("")
	return res
}

// clip returns s cut to at most n characters, an ellipsis marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func (o *Operator) caps(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.CapsParams
	if err := decodeOptional(raw, &p); err != nil {
		return nil, err
	}
	// Both sets are checked before either changes, so a refused value
	// changes nothing.
	bounds, boundsChanged, err := o.admissionBounds(p)
	if err != nil {
		return nil, err
	}
	c := o.Sup.Caps()
	changed := false
	setInt := func(name string, dst *int, v *int) error {
		if v == nil {
			return nil
		}
		if *v <= 0 {
			return invalidParams(fmt.Errorf("%s must be positive (got %d)", name, *v))
		}
		*dst, changed = *v, true
		return nil
	}
	for _, f := range []struct {
		name string
		dst  *int
		v    *int
	}{
		{"max_depth", &c.MaxDepth, p.MaxDepth},
		{"max_children", &c.MaxChildren, p.MaxChildren},
		{"max_total_subagents", &c.MaxTotalSubagents, p.MaxTotalSubagents},
		{"max_inflight", &c.MaxInflight, p.MaxInflight},
		{"spawn_burst", &c.SpawnBurst, p.SpawnBurst},
	} {
		if err := setInt(f.name, f.dst, f.v); err != nil {
			return nil, err
		}
	}
	if p.SpawnRate != nil {
		if *p.SpawnRate <= 0 {
			return nil, invalidParams(fmt.Errorf("spawn_rate must be positive (got %v)", *p.SpawnRate))
		}
		c.SpawnRate, changed = *p.SpawnRate, true
	}
	if p.TreeTokenCeiling != nil {
		if *p.TreeTokenCeiling <= 0 {
			return nil, invalidParams(fmt.Errorf("tree_token_ceiling must be positive (got %d)", *p.TreeTokenCeiling))
		}
		c.TreeTokenCeiling, changed = *p.TreeTokenCeiling, true
	}
	if changed {
		if err := c.Validate(); err != nil {
			return nil, invalidParams(err)
		}
	}
	if boundsChanged {
		if err := o.Admission.SetBounds(bounds); err != nil {
			return nil, invalidParams(err)
		}
	}
	if changed {
		if err := o.Sup.SetCaps(c); err != nil {
			return nil, invalidParams(err)
		}
	}
	c = o.Sup.Caps()
	return api.CapsResult{
		MaxDepth:          c.MaxDepth,
		MaxChildren:       c.MaxChildren,
		MaxTotalSubagents: c.MaxTotalSubagents,
		MaxInflight:       c.MaxInflight,
		SpawnBurst:        c.SpawnBurst,
		SpawnRate:         c.SpawnRate,
		TreeTokenCeiling:  c.TreeTokenCeiling,
		Admission:         AdmissionState(o.Admission, o.Sup),
	}, nil
}

// admissionBounds merges the admission fields of p over the bounds in force
// and checks them against each other and their ceilings; it reports whether
// p set any.
func (o *Operator) admissionBounds(p api.CapsParams) (admit.Bounds, bool, error) {
	if p.MaxRuns == nil && p.MaxLiveSubagents == nil && p.QueueCapacity == nil {
		return admit.Bounds{}, false, nil
	}
	if o.Admission == nil {
		return admit.Bounds{}, false, invalidParams(errors.New("this service has no admission control: max_live_runs, max_live_subagents and queue_capacity are not set here"))
	}
	b, ceiling := o.Admission.Bounds()
	for _, f := range []struct {
		name string
		dst  *int
		v    *int
		min  int
		max  int
	}{
		{"max_live_runs", &b.MaxRuns, p.MaxRuns, 1, ceiling.MaxRuns},
		{"max_live_subagents", &b.MaxLive, p.MaxLiveSubagents, 1, ceiling.MaxLive},
		{"queue_capacity", &b.QueueCapacity, p.QueueCapacity, 0, ceiling.QueueCapacity},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < f.min || *f.v > f.max {
			return admit.Bounds{}, false, invalidParams(fmt.Errorf("%s must be in [%d, %d] (got %d): its ceiling is derived from the memory limit", f.name, f.min, f.max, *f.v))
		}
		*f.dst = *f.v
	}
	if err := b.Validate(); err != nil {
		return admit.Bounds{}, false, invalidParams(err)
	}
	return b, true, nil
}

// AdmissionState returns the admission gauges for operators; nil without
// admission control. LiveProcesses counts the supervisor's live local
// subagents that have a process.
func AdmissionState(c *admit.Controller, sup *supervisor.Supervisor) *api.Admission {
	if c == nil {
		return nil
	}
	st := c.Stats()
	procs := 0
	for _, n := range sup.Live() {
		if n.PID > 0 {
			procs++
		}
	}
	return &api.Admission{
		MaxRuns: st.MaxRuns, MaxLiveSubagents: st.MaxLive, QueueCapacity: st.QueueCapacity,
		Ceiling: api.AdmissionBounds{MaxRuns: st.Ceiling.MaxRuns, MaxLiveSubagents: st.Ceiling.MaxLive, QueueCapacity: st.Ceiling.QueueCapacity},
		Runs:    st.Runs, Slots: st.Live, LiveProcesses: procs,
		Queued: st.Queued, QueuedByPriority: st.QueuedBy, Callers: st.Callers,
		Admitted: st.Admitted, Cancelled: st.Cancelled, Refused: st.Refused,
		Shed: st.Shed, RetryAfterSeconds: int(st.RetryAfter / time.Second),
	}
}

// Breakers returns the supervisor's restart breakers for operators, sorted
// by key.
func Breakers(sup *supervisor.Supervisor) []api.Breaker {
	out := []api.Breaker{}
	for _, b := range sup.Breakers() {
		out = append(out, breakerState(b))
	}
	return out
}

func breakerState(b supervisor.BreakerState) api.Breaker {
	out := api.Breaker{
		Key: b.Key, State: b.State, Open: b.Open, Trial: b.Trial, Openings: b.Openings,
		Failures: b.Failures, Consecutive: b.Consecutive, NextStart: b.NextStart.UTC(),
		LastOutcome: b.LastOutcome, LastAt: b.LastAt.UTC(),
	}
	if !b.Since.IsZero() {
		t := b.Since.UTC()
		out.Since = &t
	}
	if b.Open {
		at := b.OpenedAt.UTC()
		out.OpenedAt = &at
	}
	if b.State == supervisor.BreakerOpen {
		t := b.NextTrial.UTC()
		out.NextTrial = &t
	}
	return out
}

// closeBreaker serves a2a.CloseBreaker: it closes a restart breaker by key
// (required: a Breaker's key from a2a.Tree), which lets its starts resume at
// once.
func (o *Operator) closeBreaker(ctx context.Context, raw json.RawMessage) (any, error) {
	var p api.CloseBreakerParams
	if err := decodeOptional(raw, &p); err != nil {
		return nil, err
	}
	if p.Key == "" {
		return nil, invalidParams(errors.New("key is required: a breaker's key from a2a.Tree (the warm pool's is " + supervisor.PoolKey + ")"))
	}
	before := o.Sup.Governor().Breaker(p.Key)
	known := o.Sup.CloseBreaker(p.Key)
	return api.CloseBreakerResult{Key: p.Key, Known: known, WasOpen: before.Open, Was: before.State,
		Breaker: breakerState(o.Sup.Governor().Breaker(p.Key))}, nil
}
