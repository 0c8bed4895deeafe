package a2abind

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor/delegate"
)

// instantProvider completes every delegation by the time Start returns, as
// figure 2's stand-in for the supervisor does, allocating nothing of its own.
type instantProvider struct{}

var (
	instantDone   = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
	instantResult = api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("ok"), Usage: api.Usage{TokensIn: 1, TokensOut: 1, Steps: 1}}
)

func (instantProvider) Name() string { return delegate.LocalName }
func (instantProvider) Capabilities() delegate.Capabilities {
	return delegate.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}
}
func (instantProvider) InheritsParentContext() bool { return false }
func (instantProvider) Start(_ context.Context, req delegate.Request) (delegate.Run, error) {
	return instantRun(req.Handle), nil
}

type instantRun string

func (r instantRun) ID() string               { return string(r) }
func (instantRun) Done() <-chan struct{}      { return instantDone }
func (instantRun) Result() api.SubagentResult { return instantResult }
func (instantRun) Cancel(string)              {}

// TestExecuteAllocs pins what one blocking send costs the executor and the
// engine in memory, everything but the provider's run: a task of one turn
// (working, the distillate, completed) allocates at most 83 times and 6700
// bytes (79 and 6316 measured). Before, it was 87 and 7369: the executor
// kept a copy of each running task's request (about 770 bytes, for as long
// as the task ran) for CheckFollowUp, and built the "task accepted"
// record's attributes for a logger that drops them (5 allocations); the
// request is now shared with CheckFollowUp under a lock, and the record is
// built only for a logger that keeps it (and the distillate's text is read
// without json.Unmarshal: api's TestResultBodyTextAllocs).
func TestExecuteAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	router := &delegate.Router{}
	if err := router.Register(instantProvider{}); err != nil {
		t.Fatal(err)
	}
	exec := NewExecutor(ExecutorConfig{
		Router: router, Limits: testGrant, Intelligence: api.Intelligence{Endpoint: "builtin:demo"},
		Instance: "self", MaxDepth: func() int { return 4 }, Lineages: &delegate.Lineages{},
	})
	e := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), exec, nil)
	ctx := context.Background()
	send := func() {
		res, err := e.OnSendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hello"})})
		if err != nil {
			t.Fatal(err)
		}
		if st := res.(*a2a.Task).Status.State; st != a2a.TaskStateCompleted {
			t.Fatalf("state %s, want completed", st)
		}
	}
	for range 200 { // the store full, its maps grown: each send evicts one
		send()
	}
	const runs = 500
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		send()
	}
	runtime.ReadMemStats(&after)
	allocs := float64(after.Mallocs-before.Mallocs) / runs
	bytes := float64(after.TotalAlloc-before.TotalAlloc) / runs
	t.Logf("a send: %.1f allocations, %.0f bytes", allocs, bytes)
	if allocs > 83 || bytes > 6700 {
		t.Errorf("a send: %.1f allocations and %.0f bytes, want at most 83 and 6700", allocs, bytes)
	}
}

// TestSpanTurnNothingToRecord: a turn's result is put on a delegation span
// only when the span records (before, its attributes were built, one
// allocation a turn, for a span that dropped them).
func TestSpanTurnNothingToRecord(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ctx := context.Background()
	res := api.SubagentResult{Status: api.StatusCrashed, Detail: "d"}
	if n := testing.AllocsPerRun(100, func() { spanTurn(ctx, "local", res) }); n != 0 {
		t.Errorf("spanTurn on a span that records nothing: %v allocations, want 0", n)
	}
}
