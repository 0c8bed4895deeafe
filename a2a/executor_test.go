package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/delegate"
)

// fakeProvider records requests and answers each with result(req); hold, if
// set, keeps every run going until it closes.
type fakeProvider struct {
	name   string
	caps   delegate.Capabilities
	result func(delegate.Request) api.SubagentResult
	hold   chan struct{}
	onRun  func(delegate.Request)

	mu   sync.Mutex
	reqs []delegate.Request
}

func (f *fakeProvider) Name() string                        { return f.name }
func (f *fakeProvider) Capabilities() delegate.Capabilities { return f.caps }
func (f *fakeProvider) InheritsParentContext() bool         { return false }
func (f *fakeProvider) requests() []delegate.Request        { f.mu.Lock(); defer f.mu.Unlock(); return f.reqs }
func (f *fakeProvider) Start(ctx context.Context, req delegate.Request) (delegate.Run, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	r := &fakeRun{done: make(chan struct{}), cancel: make(chan string, 1)}
	go func() {
		defer close(r.done)
		if f.onRun != nil {
			f.onRun(req)
		}
		if f.hold != nil {
			select {
			case <-f.hold:
			case reason := <-r.cancel:
				r.res = api.SubagentResult{Status: api.StatusCancelled, Detail: reason}
				return
			}
		}
		r.res = f.result(req)
	}()
	return r, nil
}

type fakeRun struct {
	done   chan struct{}
	cancel chan string
	res    api.SubagentResult
}

func (r *fakeRun) ID() string                 { return "run" }
func (r *fakeRun) Done() <-chan struct{}      { return r.done }
func (r *fakeRun) Result() api.SubagentResult { <-r.done; return r.res }
func (r *fakeRun) Cancel(reason string) {
	select {
	case r.cancel <- reason:
	default:
	}
}

func echo(req delegate.Request) api.SubagentResult {
	return api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("answer: " + req.Payload.Contract.Objective), Usage: api.Usage{TokensIn: 3, TokensOut: 4, Steps: 1}}
}

var testGrant = api.Limits{MaxSteps: 50, MaxTokens: 1000, Deadline: api.Duration(time.Minute), MaxChildren: 8}

func newTestEngine(t *testing.T, p *fakeProvider, mutate func(*ExecutorConfig)) (*Engine, *delegate.Lineages) {
	t.Helper()
	if p.caps == (delegate.Capabilities{}) {
		p.caps = delegate.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}
	}
	router := &delegate.Router{}
	if err := router.Register(p); err != nil {
		t.Fatal(err)
	}
	lin := &delegate.Lineages{}
	cfg := ExecutorConfig{
		Router:       router,
		Limits:       testGrant,
		Intelligence: api.Intelligence{Endpoint: "builtin:demo"},
		Scope:        api.ToolScope{Allow: []api.ToolRef{{Server: "gh", Tool: "search"}, {Server: "gh", Tool: "read"}}},
		Instance:     "self",
		MaxDepth:     4,
		Lineages:     lin,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	return NewEngine(NewStore(100, time.Hour), NewExecutor(cfg), nil), lin
}

func withMeta(p *a2a.MessageSendParams, meta map[string]any) *a2a.MessageSendParams {
	p.Message.Metadata = meta
	return p
}

func TestExecutorPlainMessage(t *testing.T) {
	p := &fakeProvider{name: delegate.LocalName, result: echo}
	e, _ := newTestEngine(t, p, nil)
	task := send(t, e, msg("count words"))
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "answer: count words" {
		t.Fatalf("task: %s %q", task.Status.State, artifactText(task))
	}
	req := p.requests()[0]
	if req.Payload.Limits != testGrant || len(req.Payload.Scope.Allow) != 2 || req.Payload.Telemetry.RunID == "" {
		t.Fatalf("payload: %+v", req.Payload)
	}
	if strings.Join(req.Hops, ",") != "self" || req.Depth != 0 || req.MaxDepth != 4 {
		t.Fatalf("mesh: hops %v depth %d max %d", req.Hops, req.Depth, req.MaxDepth)
	}
	if task.Metadata[MetaStatus] != "completed" {
		t.Fatalf("metadata: %v", task.Metadata)
	}
}

func artifactText(t *a2a.Task) string {
	var out []string
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				out = append(out, tp.Text)
			}
		}
	}
	return strings.Join(out, "\n")
}

// A message from another agentd carries the whole contract: the receiver
// takes the contract and seed, narrows the tool filter to what it holds, and
// clamps the limits to its own grant.
func TestExecutorReadsTheDelegation(t *testing.T) {
	p := &fakeProvider{name: delegate.LocalName, result: echo}
	e, lin := newTestEngine(t, p, nil)
	var during delegate.Lineage
	p.onRun = func(req delegate.Request) { during = lin.Get(req.Payload.Telemetry.RunID) }
	payload := api.SpawnPayload{
		Contract:  api.OutputContract{Objective: "summarize", OutputFormat: api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(`{"type":"object"}`)}, Boundaries: "read only"},
		Seed:      api.ContextSeed{Slices: []api.SeedSlice{{Label: "doc", Content: api.SeedContent{Text: "the text"}}}},
		Scope:     api.ToolScope{Allow: []api.ToolRef{{Server: "gh", Tool: "search"}, {Server: "fs", Tool: "write"}}},
		Limits:    api.Limits{MaxSteps: 500, MaxTokens: 10, Deadline: api.Duration(time.Hour), MaxChildren: 2},
		Telemetry: api.Telemetry{Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}
	m := Outbound(payload, &payload.Scope, []string{"a", "b"}, 2, 3)
	task := send(t, e, &a2a.MessageSendParams{Message: m})
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state %s: %v", task.Status.State, task.Status.Message)
	}
	got := p.requests()[0].Payload
	if got.Contract.Boundaries != "read only" || got.Contract.OutputFormat.Kind != api.FormatJSON || string(got.Contract.OutputFormat.Schema) != `{"type":"object"}` {
		t.Fatalf("contract: %+v", got.Contract)
	}
	if len(got.Seed.Slices) != 1 || got.Seed.Slices[0].Content.Text != "the text" {
		t.Fatalf("seed: %+v", got.Seed)
	}
	if len(got.Scope.Allow) != 1 || got.Scope.Allow[0] != (api.ToolRef{Server: "gh", Tool: "search"}) {
		t.Fatalf("scope not narrowed to the grant: %+v", got.Scope)
	}
	want := api.Limits{MaxSteps: 50, MaxTokens: 10, Deadline: api.Duration(time.Minute), MaxChildren: 2}
	if got.Limits != want {
		t.Fatalf("limits = %+v, want %+v", got.Limits, want)
	}
	// The run continues the caller's trace. Its parent span is the caller's,
	// or the delegation span once a recording tracer provider is installed
	// (TestDelegationSpan installs one for the rest of the process, so the
	// span id depends on test order; the trace id does not).
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	if got.Telemetry.TraceID != traceID || !strings.Contains(got.Telemetry.Traceparent, "-"+traceID+"-") {
		t.Fatalf("trace context lost: %+v", got.Telemetry)
	}
	req := p.requests()[0]
	if strings.Join(req.Hops, ",") != "a,b,self" || req.Depth != 2 || req.MaxDepth != 3 {
		t.Fatalf("mesh: hops %v depth %d max %d", req.Hops, req.Depth, req.MaxDepth)
	}
	if strings.Join(during.Hops, ",") != "a,b,self" || during.Depth != 2 {
		t.Fatalf("lineage during the run: %+v", during)
	}
	// The executor forgets the lineage as it returns, just after the final
	// event.
	waitFor(t, func() bool { return lin.Get(got.Telemetry.RunID).Hops == nil })
}

func TestExecutorRefusals(t *testing.T) {
	p := &fakeProvider{name: delegate.LocalName, result: echo}
	e, _ := newTestEngine(t, p, nil)
	for name, tc := range map[string]struct {
		meta map[string]any
		want string
	}{
		"cycle":          {map[string]any{MetaHops: []any{"x", "self"}}, "delegation cycle"},
		"depth":          {map[string]any{MetaDepth: 5}, "depth exhausted"},
		"caller's depth": {map[string]any{MetaDepth: 3, MetaMaxDepth: 2}, "depth exhausted"},
		"bad hops":       {map[string]any{MetaHops: "self"}, "agentd/hops"},
		"bad depth":      {map[string]any{MetaDepth: -1}, "agentd/depth"},
		"bad budget":     {map[string]any{MetaBudget: map[string]any{"max_tokens": -5}}, "agentd/budget"},
		"unknown peer":   {map[string]any{MetaProvider: "peer:nobody"}, "unknown provider"},
	} {
		t.Run(name, func(t *testing.T) {
			task := send(t, e, withMeta(msg("x"), tc.meta))
			if task.Status.State != a2a.TaskStateRejected {
				t.Fatalf("state %s", task.Status.State)
			}
			if text := task.Status.Message.Parts[0].(a2a.TextPart).Text; !strings.Contains(text, tc.want) {
				t.Fatalf("message %q does not mention %q", text, tc.want)
			}
			if task.Metadata[MetaStatus] != string(api.StatusRefused) {
				t.Fatalf("metadata status %v", task.Metadata[MetaStatus])
			}
		})
	}
	if n := len(p.requests()); n != 0 {
		t.Fatalf("the provider saw %d refused requests", n)
	}
}

func TestExecutorBudgetMetadataClamps(t *testing.T) {
	p := &fakeProvider{name: delegate.LocalName, result: echo}
	e, _ := newTestEngine(t, p, nil)
	send(t, e, withMeta(msg("x"), map[string]any{MetaBudget: map[string]any{"max_tokens": 7, "max_steps": 3, "deadline_ms": 1500}}))
	l := p.requests()[0].Payload.Limits
	if l.MaxTokens != 7 || l.MaxSteps != 3 || l.Deadline.D() != 1500*time.Millisecond {
		t.Fatalf("limits %+v", l)
	}
}

// Follow-ups become turns: each runs with the turns before it as seed, the
// artifact is the last turn's distillate, and the interim answer is in the
// history.
func TestExecutorFollowUpTurns(t *testing.T) {
	hold := make(chan struct{})
	p := &fakeProvider{name: delegate.LocalName, result: echo, hold: hold}
	e, _ := newTestEngine(t, p, nil)
	task := send(t, e, nonBlockingMsg("first question"))
	follow := nonBlockingMsg("second question")
	follow.Message.TaskID = task.ID
	send(t, e, follow)
	close(hold)
	final := waitTerminal(t, e, task.ID)
	reqs := p.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d turns", len(reqs))
	}
	second := reqs[1].Payload
	if second.Contract.Objective != "second question" || len(second.Seed.Slices) != 2 ||
		second.Seed.Slices[0].Content.Text != "first question" || second.Seed.Slices[1].Content.Text != "answer: first question" {
		t.Fatalf("second turn: %+v", second)
	}
	if final.Status.State != a2a.TaskStateCompleted || artifactText(final) != "answer: second question" || len(final.Artifacts) != 1 {
		t.Fatalf("final: %s %q (%d artifacts)", final.Status.State, artifactText(final), len(final.Artifacts))
	}
	var sawInterim bool
	for _, m := range final.History {
		if m.Role == a2a.MessageRoleAgent && strings.Contains(m.Parts[0].(a2a.TextPart).Text, "answer: first question") {
			sawInterim = true
		}
	}
	if !sawInterim {
		t.Fatal("the first turn's answer is not in the history")
	}
}

func TestExecutorCancelStopsTheTurn(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	p := &fakeProvider{name: delegate.LocalName, result: echo, hold: hold}
	e, _ := newTestEngine(t, p, nil)
	task := send(t, e, nonBlockingMsg("long"))
	waitFor(t, func() bool { return len(p.requests()) == 1 })
	got, err := e.OnCancelTask(context.Background(), &a2a.TaskIDParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: %v %v", got, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestReadInbound(t *testing.T) {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "a"}, a2a.TextPart{Text: " "}, a2a.TextPart{Text: "b"})
	in, err := ReadInbound(m, map[string]any{MetaSkill: "research", MetaProvider: "peer:x", MetaHops: []any{"h1"}})
	if err != nil || in.Objective != "a\nb" || in.Skill != "research" || in.Provider != "peer:x" || in.Hops[0] != "h1" || in.Delegation != nil {
		t.Fatalf("%+v %v", in, err)
	}
	two := a2a.NewMessage(a2a.MessageRoleUser,
		a2a.DataPart{Data: map[string]any{DataKeyDelegation: map[string]any{"contract": map[string]any{"objective": "x"}}}},
		a2a.DataPart{Data: map[string]any{DataKeyDelegation: map[string]any{"contract": map[string]any{"objective": "y"}}}})
	if _, err := ReadInbound(two, nil); !errors.Is(err, errBadDelegation) {
		t.Fatalf("two delegations: %v", err)
	}
	unknownField := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{DataKeyDelegation: map[string]any{"contract": map[string]any{"objective": "x"}, "tools": true}}})
	if _, err := ReadInbound(unknownField, nil); !errors.Is(err, errBadDelegation) {
		t.Fatalf("unknown field: %v", err)
	}
	badSchema := a2a.NewMessage(a2a.MessageRoleUser, a2a.DataPart{Data: map[string]any{DataKeyDelegation: map[string]any{"contract": map[string]any{"objective": "x", "output_format": map[string]any{"kind": "json", "schema": 5}}}}})
	if _, err := ReadInbound(badSchema, nil); !errors.Is(err, errBadDelegation) {
		t.Fatalf("bad schema: %v", err)
	}
	other := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "t"}, a2a.DataPart{Data: map[string]any{"unrelated": 1}})
	if in, err := ReadInbound(other, nil); err != nil || in.Delegation != nil || in.Objective != "t" {
		t.Fatalf("an unrelated data part: %+v %v", in, err)
	}
}

// FuzzReadInbound reads arbitrary messages: never a panic, and an accepted
// one has sane mesh values.
func FuzzReadInbound(f *testing.F) {
	payload := api.SpawnPayload{Contract: api.OutputContract{Objective: "o"}, Limits: testGrant}
	b, _ := json.Marshal(Outbound(payload, nil, []string{"a"}, 1, 4))
	f.Add(b)
	for _, s := range []string{
		`{"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"agentd/depth":2,"agentd/hops":["x","y"]}}`,
		`{"messageId":"m","role":"user","parts":[{"kind":"data","data":{"agentd/delegation":{"contract":{"objective":"x","output_format":{"kind":"json","schema":true}},"scope":{"allow":[{"server":"s","tool":"t"}]}}}}]}`,
		`{"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}],"metadata":{"agentd/budget":{"max_tokens":1e30}}}`,
		`{"messageId":"m","role":"user","parts":[],"metadata":{"agentd/depth":1.5}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m a2a.Message
		if json.Unmarshal(b, &m) != nil {
			return
		}
		in, err := ReadInbound(&m, nil)
		if err != nil {
			return
		}
		if in.Depth < 0 || in.MaxDepth < 0 || len(in.Hops) > 64 {
			t.Fatalf("accepted %+v", in)
		}
		if d := in.Delegation; d != nil && (d.Limits.MaxSteps < 0 || d.Limits.MaxTokens < 0 || d.Limits.Deadline < 0) {
			t.Fatalf("accepted negative limits %+v", d.Limits)
		}
	})
}

// startProvider's Start blocks until its context ends (a peer whose card is
// slow to read), or fails at once with err.
type startProvider struct {
	err     error
	started chan struct{}
}

func (p *startProvider) Name() string { return delegate.LocalName }
func (p *startProvider) Capabilities() delegate.Capabilities {
	return delegate.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}
}
func (p *startProvider) InheritsParentContext() bool { return false }
func (p *startProvider) Start(ctx context.Context, req delegate.Request) (delegate.Run, error) {
	if p.err != nil {
		return nil, p.err
	}
	close(p.started)
	<-ctx.Done()
	return nil, fmt.Errorf("read the agent card: %w", ctx.Err())
}

// A delegation that cannot start ends the task with the exact status in
// metadata: crashed (failed) for a provider error, cancelled (canceled) when
// tasks/cancel arrives while the provider is still starting.
func TestExecutorStartFailures(t *testing.T) {
	newEngine := func(p *startProvider) *Engine {
		router := &delegate.Router{}
		if err := router.Register(p); err != nil {
			t.Fatal(err)
		}
		return NewEngine(NewStore(10, time.Hour), NewExecutor(ExecutorConfig{Router: router, Limits: testGrant}), nil)
	}
	e := newEngine(&startProvider{err: errors.New("spawn failed")})
	task := send(t, e, msg("x"))
	if task.Status.State != a2a.TaskStateFailed || task.Metadata[MetaStatus] != string(api.StatusCrashed) ||
		task.Status.Message.Parts[0].(a2a.TextPart).Text != "the delegation did not start: spawn failed" {
		t.Fatalf("provider error: %s, status %v, %+v", task.Status.State, task.Metadata[MetaStatus], task.Status.Message)
	}

	p := &startProvider{started: make(chan struct{})}
	e = newEngine(p)
	task = send(t, e, nonBlockingMsg("x"))
	<-p.started
	got, err := e.OnCancelTask(context.Background(), &a2a.TaskIDParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled || got.Metadata[MetaStatus] != string(api.StatusCancelled) {
		t.Fatalf("cancel while starting: %+v %v", got, err)
	}
}

// A follow-up with no text to take as an objective is not run, and the final
// status says so rather than dropping it silently.
func TestExecutorFollowUpWithoutText(t *testing.T) {
	hold := make(chan struct{})
	p := &fakeProvider{name: delegate.LocalName, result: echo, hold: hold}
	e, _ := newTestEngine(t, p, nil)
	task := send(t, e, nonBlockingMsg("first question"))
	follow := nonBlockingMsg("")
	follow.Message.Parts = a2a.ContentParts{a2a.DataPart{Data: map[string]any{"x": 1}}}
	follow.Message.TaskID = task.ID
	if _, err := e.OnSendMessage(context.Background(), follow); err != nil {
		t.Fatal(err)
	}
	close(hold)
	final := waitTerminal(t, e, task.ID)
	if n := len(p.requests()); n != 1 {
		t.Fatalf("%d turns ran, want 1", n)
	}
	if final.Status.State != a2a.TaskStateCompleted || final.Status.Message == nil ||
		!strings.Contains(final.Status.Message.Parts[0].(a2a.TextPart).Text, "1 follow-up message(s) were not run") {
		t.Fatalf("final status: %s %+v", final.Status.State, final.Status.Message)
	}
}

// treeRun is a run whose tree outlives its result: a detached subagent keeps
// running until tree closes.
type treeRun struct {
	delegate.Run
	tree chan struct{}
}

func (r treeRun) TreeDone() <-chan struct{} { return r.tree }

type treeProvider struct {
	*fakeProvider
	tree chan struct{}
}

func (p treeProvider) Start(ctx context.Context, req delegate.Request) (delegate.Run, error) {
	r, err := p.fakeProvider.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return treeRun{Run: r, tree: p.tree}, nil
}

// A tree's lineage (its hops and mesh depth) stays while any of its
// subagents runs, detached ones included, not just until the task ends: a
// detached subagent's remote delegation still carries the hop list and the
// depth cap, so it can neither close a cycle nor escape the cap.
func TestLineageOutlivesTheTaskWhileItsTreeRuns(t *testing.T) {
	fp := &fakeProvider{name: delegate.LocalName, caps: delegate.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}, result: echo}
	p := treeProvider{fakeProvider: fp, tree: make(chan struct{})}
	router := &delegate.Router{}
	if err := router.Register(p); err != nil {
		t.Fatal(err)
	}
	lin := &delegate.Lineages{}
	e := NewEngine(NewStore(10, time.Hour), NewExecutor(ExecutorConfig{Router: router, Limits: testGrant, Instance: "self", MaxDepth: 4, Lineages: lin}), nil)
	task := send(t, e, msg("detach a helper"))
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state %s", task.Status.State)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Wait(ctx); err != nil { // the executor has returned
		t.Fatal(err)
	}
	runID := fp.requests()[0].Payload.Telemetry.RunID
	if got := lin.Get(runID); strings.Join(got.Hops, ",") != "self" || got.MaxDepth != 4 {
		t.Fatalf("lineage while the tree still runs: %+v", got)
	}
	close(p.tree)
	waitFor(t, func() bool { return lin.Get(runID).Hops == nil })
}
