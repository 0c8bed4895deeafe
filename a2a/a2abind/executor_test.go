package a2abind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor/delegate"
)

var testGrant = api.Limits{MaxSteps: 50, MaxTokens: 1000, Deadline: api.Duration(time.Minute), MaxChildren: 8}

func newTestEngine(t *testing.T, p *a2atest.Provider, mutate func(*ExecutorConfig)) (*tasks.Engine, *delegate.Lineages) {
	t.Helper()
	if p.Caps == (delegate.Capabilities{}) {
		p.Caps = a2atest.FullCaps
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
		Scope: func() api.ToolScope {
			return api.ToolScope{Allow: []api.ToolRef{{Server: "gh", Tool: "search"}, {Server: "gh", Tool: "read"}}}
		},
		Instance: "self",
		MaxDepth: func() int { return 4 },
		Lineages: lin,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	return tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), NewExecutor(cfg), nil), lin
}

func withMeta(p *a2a.MessageSendParams, meta map[string]any) *a2a.MessageSendParams {
	p.Message.Metadata = meta
	return p
}

func TestExecutorPlainMessage(t *testing.T) {
	p := &a2atest.Provider{Result: a2atest.Echo}
	e, _ := newTestEngine(t, p, nil)
	task := a2atest.Send(t, e, a2atest.Msg("count words"))
	if task.Status.State != a2a.TaskStateCompleted || a2atest.ArtifactText(task) != "answer: count words" {
		t.Fatalf("task: %s %q", task.Status.State, a2atest.ArtifactText(task))
	}
	req := p.Requests()[0]
	if req.Payload.Limits != testGrant || len(req.Payload.Scope.Allow) != 2 || req.Payload.Telemetry.RunID == "" {
		t.Fatalf("payload: %+v", req.Payload)
	}
	if strings.Join(req.Hops, ",") != "self" || req.Depth != 0 || req.MaxDepth != 4 {
		t.Fatalf("mesh: hops %v depth %d max %d", req.Hops, req.Depth, req.MaxDepth)
	}
	if task.Metadata[api.MetaStatus] != "completed" {
		t.Fatalf("metadata: %v", task.Metadata)
	}
}

// A message from another agentd carries the whole contract: the receiver
// takes the contract and seed, narrows the tool filter to what it holds, and
// clamps the limits to its own grant.
func TestExecutorReadsTheDelegation(t *testing.T) {
	p := &a2atest.Provider{Result: a2atest.Echo}
	e, lin := newTestEngine(t, p, nil)
	var during delegate.Lineage
	p.OnRun = func(req delegate.Request) { during = lin.Get(req.Payload.Telemetry.RunID) }
	payload := api.SpawnPayload{
		Contract:  api.OutputContract{Objective: "summarize", OutputFormat: api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(`{"type":"object"}`)}, Boundaries: "read only"},
		Seed:      api.ContextSeed{Slices: []api.SeedSlice{{Label: "doc", Content: api.SeedContent{Text: "the text"}}}},
		Scope:     api.ToolScope{Allow: []api.ToolRef{{Server: "gh", Tool: "search"}, {Server: "fs", Tool: "write"}}},
		Limits:    api.Limits{MaxSteps: 500, MaxTokens: 10, Deadline: api.Duration(time.Hour), MaxChildren: 2},
		Telemetry: api.Telemetry{Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}
	m := Outbound(payload, &payload.Scope, []string{"a", "b"}, 2, 3)
	task := a2atest.Send(t, e, &a2a.MessageSendParams{Message: m})
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state %s: %v", task.Status.State, task.Status.Message)
	}
	got := p.Requests()[0].Payload
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
	req := p.Requests()[0]
	if strings.Join(req.Hops, ",") != "a,b,self" || req.Depth != 2 || req.MaxDepth != 3 {
		t.Fatalf("mesh: hops %v depth %d max %d", req.Hops, req.Depth, req.MaxDepth)
	}
	if strings.Join(during.Hops, ",") != "a,b,self" || during.Depth != 2 {
		t.Fatalf("lineage during the run: %+v", during)
	}
	// The executor forgets the lineage as it returns, just after the final
	// event.
	testkit.WaitFor(t, a2atest.Wait, "the lineage forgotten", func() bool { return lin.Get(got.Telemetry.RunID).Hops == nil })
}

func TestExecutorRefusals(t *testing.T) {
	p := &a2atest.Provider{Result: a2atest.Echo}
	e, _ := newTestEngine(t, p, nil)
	for name, tc := range map[string]struct {
		meta map[string]any
		want string
	}{
		"cycle":          {map[string]any{api.MetaHops: []any{"x", "self"}}, "delegation cycle"},
		"depth":          {map[string]any{api.MetaDepth: 5}, "depth exhausted"},
		"caller's depth": {map[string]any{api.MetaDepth: 3, api.MetaMaxDepth: 2}, "depth exhausted"},
		"bad hops":       {map[string]any{api.MetaHops: "self"}, "agentd/hops"},
		"bad depth":      {map[string]any{api.MetaDepth: -1}, "agentd/depth"},
		"bad budget":     {map[string]any{api.MetaBudget: map[string]any{"max_tokens": -5}}, "agentd/budget"},
		"unknown peer":   {map[string]any{api.MetaProvider: "peer:nobody"}, "unknown provider"},
	} {
		t.Run(name, func(t *testing.T) {
			task := a2atest.Send(t, e, withMeta(a2atest.Msg("x"), tc.meta))
			if task.Status.State != a2a.TaskStateRejected {
				t.Fatalf("state %s", task.Status.State)
			}
			if text := task.Status.Message.Parts[0].(a2a.TextPart).Text; !strings.Contains(text, tc.want) {
				t.Fatalf("message %q does not mention %q", text, tc.want)
			}
			if task.Metadata[api.MetaStatus] != string(api.StatusRefused) {
				t.Fatalf("metadata status %v", task.Metadata[api.MetaStatus])
			}
		})
	}
	if n := len(p.Requests()); n != 0 {
		t.Fatalf("the provider saw %d refused requests", n)
	}
}

func TestExecutorBudgetMetadataClamps(t *testing.T) {
	p := &a2atest.Provider{Result: a2atest.Echo}
	e, _ := newTestEngine(t, p, nil)
	a2atest.Send(t, e, withMeta(a2atest.Msg("x"), map[string]any{api.MetaBudget: map[string]any{"max_tokens": 7, "max_steps": 3, "deadline_ms": 1500}}))
	l := p.Requests()[0].Payload.Limits
	if l.MaxTokens != 7 || l.MaxSteps != 3 || l.Deadline.D() != 1500*time.Millisecond {
		t.Fatalf("limits %+v", l)
	}
}

// Follow-ups become turns: each runs with the turns before it as seed, the
// artifact is the last turn's distillate, and the interim answer is in the
// history.
func TestExecutorFollowUpTurns(t *testing.T) {
	hold := make(chan struct{})
	p := &a2atest.Provider{Result: a2atest.Echo, Hold: hold}
	e, _ := newTestEngine(t, p, nil)
	task := a2atest.Send(t, e, a2atest.NonBlocking("first question"))
	follow := a2atest.NonBlocking("second question")
	follow.Message.TaskID = task.ID
	a2atest.Send(t, e, follow)
	close(hold)
	final := a2atest.WaitTerminal(t, e, task.ID)
	reqs := p.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d turns", len(reqs))
	}
	second := reqs[1].Payload
	if second.Contract.Objective != "second question" || len(second.Seed.Slices) != 2 ||
		second.Seed.Slices[0].Content.Text != "first question" || second.Seed.Slices[1].Content.Text != "answer: first question" {
		t.Fatalf("second turn: %+v", second)
	}
	if final.Status.State != a2a.TaskStateCompleted || a2atest.ArtifactText(final) != "answer: second question" || len(final.Artifacts) != 1 {
		t.Fatalf("final: %s %q (%d artifacts)", final.Status.State, a2atest.ArtifactText(final), len(final.Artifacts))
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

// A follow-up that would take the task's next turn over the control frame
// limit is refused when it is sent (invalid params naming --max-message),
// and the task goes on: the follow-up accepted before it runs as the next
// turn, and the task completes. Before, the follow-ups were accepted and
// the turn that could not carry them ended the task rejected.
func TestExecutorFollowUpOverTheFrameRefused(t *testing.T) {
	hold := make(chan struct{})
	p := &a2atest.Provider{Result: a2atest.Echo, Hold: hold}
	const frame = 512 << 10
	e, _ := newTestEngine(t, p, func(c *ExecutorConfig) { c.MaxFrame = frame })
	task := a2atest.Send(t, e, a2atest.NonBlocking("first question"))
	testkit.WaitFor(t, a2atest.Wait, "the first turn started", func() bool { return len(p.Requests()) == 1 })
	big := strings.Repeat("x", 200<<10)
	follow := a2atest.NonBlocking(big)
	follow.Message.TaskID = task.ID
	if _, err := e.OnSendMessage(context.Background(), follow); err != nil {
		t.Fatalf("a follow-up the next turn can carry: %v", err)
	}
	over := a2atest.NonBlocking(big)
	over.Message.TaskID = task.ID
	_, err := e.OnSendMessage(context.Background(), over)
	if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), "--max-message") {
		t.Fatalf("a follow-up that takes the next turn over the %d-byte frame: %v, want invalid params naming --max-message", frame, err)
	}
	close(hold)
	final := a2atest.WaitTerminal(t, e, task.ID)
	reqs := p.Requests()
	if final.Status.State != a2a.TaskStateCompleted || len(reqs) != 2 || reqs[1].Payload.Contract.Objective != big {
		t.Fatalf("the task after the refusal: %s, %d turns", final.Status.State, len(reqs))
	}
	for _, m := range final.History {
		if m.ID == over.Message.ID {
			t.Fatal("the refused follow-up is in the task's history")
		}
	}
}

func TestExecutorCancelStopsTheTurn(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	p := &a2atest.Provider{Result: a2atest.Echo, Hold: hold}
	e, _ := newTestEngine(t, p, nil)
	task := a2atest.Send(t, e, a2atest.NonBlocking("long"))
	testkit.WaitFor(t, a2atest.Wait, "the request started", func() bool { return len(p.Requests()) == 1 })
	got, err := e.OnCancelTask(context.Background(), &a2a.TaskIDParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: %v %v", got, err)
	}
	// The turn produced nothing: no artifact (an empty one was published),
	// and the status message says why, the status named once.
	final := a2atest.WaitTerminal(t, e, task.ID)
	if len(final.Artifacts) != 0 {
		t.Errorf("the cancelled task has artifacts %+v, want none", final.Artifacts)
	}
	if final.Status.Message == nil || len(final.Status.Message.Parts) != 1 {
		t.Fatalf("status message %+v", final.Status.Message)
	}
	if text := final.Status.Message.Parts[0].(a2a.TextPart).Text; text != "cancelled: at the client's request" {
		t.Errorf("status message %q, want %q", text, "cancelled: at the client's request")
	}
}

// A result's status message names its status once, whether or not the detail
// already starts with it (the supervisor words a cancellation "cancelled:
// ..."; a peer's detail is its status message), and only a completed result
// or one with a distillate publishes an artifact.
func TestFinalStatusAndArtifact(t *testing.T) {
	info := &a2a.Task{ID: "t", ContextID: "c"}
	for _, tc := range []struct {
		res      api.SubagentResult
		text     string
		artifact bool
	}{
		{api.SubagentResult{Status: api.StatusCancelled, Detail: "cancelled: at the client's request"}, "cancelled: at the client's request", false},
		{api.SubagentResult{Status: api.StatusCancelled, Detail: "at the client's request", Distillate: api.InlineText("")}, "cancelled: at the client's request", false},
		{api.SubagentResult{Status: api.StatusCancelled, Detail: "cancelled: its parent ended", Distillate: api.InlineText("half an answer")}, "cancelled: its parent ended", true},
		{api.SubagentResult{Status: api.StatusDeadline, Detail: "deadline of 1s passed", Distillate: api.ResultBody{Inline: []byte("null")}}, "deadline: deadline of 1s passed", false},
		{api.SubagentResult{Status: api.StatusCrashed, Distillate: api.ResultBody{Reference: &api.Reference{URI: "agent://blob/x"}}}, "crashed", true},
		{api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("")}, "", true},
	} {
		ev := FinalStatus(info, tc.res)
		text := ""
		if ev.Status.Message != nil {
			text = ev.Status.Message.Parts[0].(a2a.TextPart).Text
		}
		if text != tc.text {
			t.Errorf("%+v: status message %q, want %q", tc.res, text, tc.text)
		}
		if got := HasArtifact(tc.res); got != tc.artifact {
			t.Errorf("%+v: HasArtifact %v, want %v", tc.res, got, tc.artifact)
		}
	}
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
	newEngine := func(p *startProvider) *tasks.Engine {
		router := &delegate.Router{}
		if err := router.Register(p); err != nil {
			t.Fatal(err)
		}
		return tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), NewExecutor(ExecutorConfig{Router: router, Limits: testGrant}), nil)
	}
	e := newEngine(&startProvider{err: errors.New("spawn failed")})
	task := a2atest.Send(t, e, a2atest.Msg("x"))
	if task.Status.State != a2a.TaskStateFailed || task.Metadata[api.MetaStatus] != string(api.StatusCrashed) ||
		task.Status.Message.Parts[0].(a2a.TextPart).Text != "the delegation did not start: spawn failed" {
		t.Fatalf("provider error: %s, status %v, %+v", task.Status.State, task.Metadata[api.MetaStatus], task.Status.Message)
	}

	p := &startProvider{started: make(chan struct{})}
	e = newEngine(p)
	task = a2atest.Send(t, e, a2atest.NonBlocking("x"))
	<-p.started
	got, err := e.OnCancelTask(context.Background(), &a2a.TaskIDParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled || got.Metadata[api.MetaStatus] != string(api.StatusCancelled) {
		t.Fatalf("cancel while starting: %+v %v", got, err)
	}
}

// A follow-up with no text to take as an objective is not run, and the final
// status says so rather than dropping it silently.
func TestExecutorFollowUpWithoutText(t *testing.T) {
	hold := make(chan struct{})
	p := &a2atest.Provider{Result: a2atest.Echo, Hold: hold}
	e, _ := newTestEngine(t, p, nil)
	task := a2atest.Send(t, e, a2atest.NonBlocking("first question"))
	follow := a2atest.NonBlocking("")
	follow.Message.Parts = a2a.ContentParts{a2a.DataPart{Data: map[string]any{"x": 1}}}
	follow.Message.TaskID = task.ID
	if _, err := e.OnSendMessage(context.Background(), follow); err != nil {
		t.Fatal(err)
	}
	close(hold)
	final := a2atest.WaitTerminal(t, e, task.ID)
	if n := len(p.Requests()); n != 1 {
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
	*a2atest.Provider
	tree chan struct{}
}

func (p treeProvider) Start(ctx context.Context, req delegate.Request) (delegate.Run, error) {
	r, err := p.Provider.Start(ctx, req)
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
	fp := &a2atest.Provider{Caps: a2atest.FullCaps, Result: a2atest.Echo}
	p := treeProvider{Provider: fp, tree: make(chan struct{})}
	router := &delegate.Router{}
	if err := router.Register(p); err != nil {
		t.Fatal(err)
	}
	lin := &delegate.Lineages{}
	e := tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), NewExecutor(ExecutorConfig{Router: router, Limits: testGrant, Instance: "self", MaxDepth: func() int { return 4 }, Lineages: lin}), nil)
	task := a2atest.Send(t, e, a2atest.Msg("detach a helper"))
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state %s", task.Status.State)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Wait(ctx); err != nil { // the executor has returned
		t.Fatal(err)
	}
	runID := fp.Requests()[0].Payload.Telemetry.RunID
	if got := lin.Get(runID); strings.Join(got.Hops, ",") != "self" || got.MaxDepth != 4 {
		t.Fatalf("lineage while the tree still runs: %+v", got)
	}
	close(p.tree)
	testkit.WaitFor(t, a2atest.Wait, "the lineage forgotten", func() bool { return lin.Get(runID).Hops == nil })
}

// settledRun is a run whose result is final (Settled) before it is Done:
// a local subagent whose process is still exiting; reaped closes Done.
type settledRun struct {
	delegate.Run
	reaped chan struct{}
}

func (r settledRun) Done() <-chan struct{}             { return r.reaped }
func (r settledRun) Settled() <-chan struct{}          { return r.Run.Done() }
func (r settledRun) SettledResult() api.SubagentResult { return r.Run.Result() }
func (r settledRun) Result() api.SubagentResult        { <-r.reaped; return r.Run.Result() }

type settledProvider struct {
	*a2atest.Provider
	reaped chan struct{}
}

func (p settledProvider) Start(ctx context.Context, req delegate.Request) (delegate.Run, error) {
	r, err := p.Provider.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return settledRun{Run: r, reaped: p.reaped}, nil
}

// A result that is final before its process is reaped (delegate.SettledRun)
// ends the task at once: the blocking send is answered with the completed
// task while the process is still exiting. The executor returns (giving back
// the task's admission slots) only once the process is reaped.
func TestExecutorAnswersAtTheSettledResult(t *testing.T) {
	fp := &a2atest.Provider{Caps: a2atest.FullCaps, Result: a2atest.Echo}
	p := settledProvider{Provider: fp, reaped: make(chan struct{})}
	router := &delegate.Router{}
	if err := router.Register(p); err != nil {
		t.Fatal(err)
	}
	e := tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), NewExecutor(ExecutorConfig{Router: router, Limits: testGrant}), nil)
	task := a2atest.Send(t, e, a2atest.Msg("count words"))
	if task.Status.State != a2a.TaskStateCompleted || a2atest.ArtifactText(task) != "answer: count words" {
		t.Fatalf("task: %s %q", task.Status.State, a2atest.ArtifactText(task))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.Wait(ctx); err == nil {
		t.Fatal("the executor returned before the process was reaped")
	}
	close(p.reaped)
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Wait(ctx); err != nil {
		t.Fatalf("the executor did not return after the reap: %v", err)
	}
}
