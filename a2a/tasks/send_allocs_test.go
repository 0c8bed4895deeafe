package tasks

import (
	"context"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/internal/testkit"
)

// frontExec writes what a2abind's executor writes for figure 2's task of
// one turn: working with the caller's metadata, the answer's artifact,
// completed with the result's metadata.
type frontExec struct{}

func (frontExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	working := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)
	working.Metadata = map[string]any{"agentd/caller": "spiffe://bench/peer", "agentd/caller_auth": "mtls", "agentd/started": "2026-12-07T10:00:00Z"}
	if err := q.Write(ctx, working); err != nil {
		return err
	}
	art := &a2a.TaskArtifactUpdateEvent{TaskID: reqCtx.TaskID, ContextID: reqCtx.ContextID, LastChunk: true,
		Artifact: &a2a.Artifact{ID: "distillate", Parts: a2a.ContentParts{a2a.TextPart{Text: "ok"}}}}
	if err := q.Write(ctx, art); err != nil {
		return err
	}
	final := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	final.Final = true
	final.Metadata = map[string]any{"agentd/status": "completed", "agentd/usage": map[string]any{"tokens_in": 1, "tokens_out": 1, "steps": 1}}
	return q.Write(ctx, final)
}

func (frontExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// sendFront sends one message of its own id to e and checks that its task
// completed.
func sendFront(tb testing.TB, e *Engine, i int) {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hello"})
	res, err := e.OnSendMessage(context.Background(), &a2a.MessageSendParams{Message: msg})
	if err != nil {
		tb.Fatal(err)
	}
	if t := res.(*a2a.Task); t.Status.State != a2a.TaskStateCompleted {
		tb.Fatalf("send %d: state %s", i, t.Status.State)
	}
}

// sendCost is what one blocking send of frontExec's task costs the engine
// and the memory store, in allocations and bytes, the store full (each send
// evicts one task), the message and the executor's events included.
func sendCost(tb testing.TB) (allocs, bytes float64) {
	e := NewEngine(NewMemoryStore(100, time.Hour), frontExec{}, nil)
	for i := range 200 {
		sendFront(tb, e, i)
	}
	const runs = 500
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range runs {
		sendFront(tb, e, i)
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / runs, float64(after.TotalAlloc-before.TotalAlloc) / runs
}

// What one blocking send costs the engine and the memory store at most
// (sendCost); the test's message and frontExec's events are 17 allocations
// and about 1500 bytes of it. Before, 54 and 4461 measured: a status
// update's metadata was copied into a task that had none (mergeMeta: 2
// allocations, 336 bytes, TestApplyTakesEventMetadata); its wait made an
// interrupt channel besides the stall's (waitStop: 1 allocation, 96
// bytes, TestWaitStopSeesAnInterruptThatEnded); the store's ledger kept
// an entry of its own per task, found by key, and two list elements once
// it finished, and a list of one for the task each send evicts (4
// allocations, 88 bytes: budget's TestAdmitEntryAllocs); the run's
// function was a closure of the executor's call (launch.start: 1
// allocation, 24 bytes); a live task was 304 bytes, in the 320 size
// class (TestLiveTaskSizeClass).
const (
	maxSendAllocs = 46
	maxSendBytes  = 3930
)

// TestSendAllocs pins what one blocking send costs the engine and the
// memory store (sendCost).
func TestSendAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	allocs, bytes := sendCost(t)
	t.Logf("a send: %.1f allocations, %.0f bytes", allocs, bytes)
	if allocs > maxSendAllocs+0.5 || bytes > maxSendBytes { // a background allocation now and then: not a whole one a send
		t.Errorf("a send: %.1f allocations and %.0f bytes, want at most %d and %d", allocs, bytes, maxSendAllocs, maxSendBytes)
	}
}

// BenchmarkSend is one blocking send of frontExec's task through the engine
// and the memory store, the store full.
func BenchmarkSend(b *testing.B) {
	e := NewEngine(NewMemoryStore(10000, time.Hour), frontExec{}, nil)
	for i := range 10100 {
		sendFront(b, e, i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sendFront(b, e, i)
		i++
	}
}

// TestApplyTakesEventMetadata: a status update's metadata becomes the
// metadata of a task that has none as it is (one allocation: the new
// snapshot; before, a copy of the map too, two more), and is merged into a
// new map over a task's own, which stays as it was.
func TestApplyTakesEventMetadata(t *testing.T) {
	ts := time.Now()
	old := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: &ts}}
	ev := &a2a.TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &ts},
		Metadata: map[string]any{"agentd/caller": "spiffe://td/peer", "agentd/caller_auth": "mtls"}}
	next, err := Apply(old, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Metadata) != 2 || next.Metadata["agentd/caller"] != "spiffe://td/peer" || old.Metadata != nil {
		t.Fatalf("metadata %v (old %v)", next.Metadata, old.Metadata)
	}
	final := &a2a.TaskStatusUpdateEvent{TaskID: "t1", ContextID: "c1", Final: true, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &ts},
		Metadata: map[string]any{"agentd/status": "completed", "agentd/caller_auth": "none"}}
	end, err := Apply(next, final)
	if err != nil {
		t.Fatal(err)
	}
	if len(end.Metadata) != 3 || end.Metadata["agentd/caller_auth"] != "none" || end.Metadata["agentd/caller"] != "spiffe://td/peer" ||
		len(next.Metadata) != 2 || next.Metadata["agentd/caller_auth"] != "mtls" || len(final.Metadata) != 2 {
		t.Fatalf("merged %v; the working snapshot's %v, the event's %v", end.Metadata, next.Metadata, final.Metadata)
	}
	if raceEnabled {
		return // the race detector allocates
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Apply(old, ev) }); n != 1 {
		t.Errorf("Apply of a status update with metadata to a task without: %.0f allocations, want 1", n)
	}
}

// TestWaitStopSeesAnInterruptThatEnded: a blocking send's wait returns
// once its task was interrupted (input-required) since the wait began,
// even if it was answered (working again) before the wait looked, and at
// once when the task is interrupted as it begins; a wait without
// atInterrupt goes on until the task ends. The wait makes one channel (the
// stall's wake), where it made two (an interrupt channel too).
func TestWaitStopSeesAnInterruptThatEnded(t *testing.T) {
	e := NewEngine(NewMemoryStore(10, time.Hour), frontExec{}, nil)
	lt := &liveTask{task: &a2a.Task{ID: "t1"}, done: make(chan struct{})}
	waiting := func() bool { lt.stall.mu.Lock(); defer lt.stall.mu.Unlock(); return lt.stall.wake != nil }
	stop, end := make(chan error, 1), make(chan error, 1)
	go func() { stop <- e.waitStop(context.Background(), lt, nil, true) }()
	testkit.WaitFor(t, a2atest.Wait, "the wait", waiting)
	go func() { end <- e.waitEnd(context.Background(), lt, nil) }()
	lt.mu.Lock()
	lt.noteStateLocked(a2a.TaskStateInputRequired)
	lt.noteStateLocked(a2a.TaskStateWorking)
	lt.mu.Unlock()
	select {
	case err := <-stop:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(a2atest.Wait):
		t.Fatal("the wait missed the interrupt")
	}
	lt.mu.Lock()
	lt.noteStateLocked(a2a.TaskStateInputRequired)
	lt.mu.Unlock()
	if err := e.waitStop(context.Background(), lt, nil, true); err != nil { // interrupted now: at once
		t.Fatal(err)
	}
	select {
	case err := <-end:
		t.Fatalf("waitEnd returned %v before the task ended", err)
	default:
	}
	close(lt.done)
	if err := <-end; err != nil {
		t.Fatal(err)
	}
}

// TestLiveTaskSizeClass: a live task is allocated in the 288-byte size
// class, its flags side by side (each alone after a word was 304 bytes, in
// the 320 class: 32 bytes more of every send). A field that takes it over
// 288 costs 32 bytes a task: pack it with the others of its size, or move
// this bound knowingly.
func TestLiveTaskSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(liveTask{}); n > 288 {
		t.Errorf("liveTask is %d bytes, over the 288-byte size class", n)
	}
}
