package tasks

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/testkit"
)

// holdExec works until its task is cancelled, or until release closes, and
// records which tasks it ran.
type holdExec struct {
	release chan struct{}
	mu      sync.Mutex
	ran     []a2a.TaskID
}

func (h *holdExec) exec(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	h.mu.Lock()
	h.ran = append(h.ran, reqCtx.TaskID)
	h.mu.Unlock()
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	state := a2a.TaskStateCompleted
	select {
	case <-h.release:
	case <-ctx.Done():
		state = a2a.TaskStateCanceled
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, state, nil)
	ev.Final = true
	return q.Write(context.WithoutCancel(ctx), ev)
}

func (h *holdExec) ranTask(id a2a.TaskID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.ran {
		if r == id {
			return true
		}
	}
	return false
}

func admittedEngine(t *testing.T, b admit.Bounds, policy admit.Policy) (*Engine, *admit.Controller, *holdExec) {
	t.Helper()
	c, err := admit.New(admit.Config{Bounds: b, QueuePerCaller: b.QueueCapacity})
	if err != nil {
		t.Fatal(err)
	}
	h := &holdExec{release: make(chan struct{})}
	e := NewEngine(NewMemoryStore(100, time.Hour), fakeExec{h.exec}, nil, WithAdmission(c, policy))
	return e, c, h
}

func as(name string, operator bool) context.Context {
	ctx, cc := a2asrv.WithCallContext(context.Background(), nil)
	cc.User = testUser{name: name, operator: operator}
	return ctx
}

type testUser struct {
	name     string
	operator bool
}

func (u testUser) Name() string        { return u.name }
func (u testUser) Authenticated() bool { return true }
func (u testUser) Operator() bool      { return u.operator }

func sendAs(t *testing.T, e *Engine, ctx context.Context, prio string) (*a2a.Task, error) {
	t.Helper()
	p := a2atest.NonBlocking("x")
	if prio != "" {
		p.Message.Metadata = map[string]any{api.MetaPriority: prio}
	}
	res, err := e.OnSendMessage(ctx, p)
	if err != nil {
		return nil, err
	}
	return res.(*a2a.Task), nil
}

func get(t *testing.T, e *Engine, ctx context.Context, id a2a.TaskID) *a2a.Task {
	t.Helper()
	task, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// waitTerminal polls tasks/get as the caller of ctx until the task ends.
func waitTerminal(t *testing.T, e *Engine, ctx context.Context, id a2a.TaskID) *a2a.Task {
	t.Helper()
	var got *a2a.Task
	testkit.WaitFor(t, a2atest.Wait, "task "+string(id)+" terminal", func() bool {
		got = get(t, e, ctx, id)
		return got.Status.State.Terminal()
	})
	return got
}

// A task past the bounds is submitted with its queue position; the position
// moves as the queue does; tasks/cancel ends a queued task canceled without
// running it; once a slot frees, the next task runs and loses its position.
func TestQueuedTaskPositionAndCancel(t *testing.T) {
	e, c, h := admittedEngine(t, admit.Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 4}, admit.Policy{})
	alice := as("spiffe://td/alice", false)
	first, err := sendAs(t, e, alice, "")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, a2atest.Wait, "the first task running", func() bool { return h.ranTask(first.ID) })
	var queued []*a2a.Task
	for i := 0; i < 3; i++ {
		task, err := sendAs(t, e, alice, "")
		if err != nil {
			t.Fatal(err)
		}
		if task.Status.State != a2a.TaskStateSubmitted || task.Metadata[api.MetaQueuePosition] != i+1 || task.Metadata[api.MetaPriority] != "normal" {
			t.Fatalf("queued task %d: %s, metadata %v", i, task.Status.State, task.Metadata)
		}
		queued = append(queued, task)
	}
	// Cancel the first queued task: terminal canceled, never run.
	got, err := e.OnCancelTask(alice, &a2a.TaskIDParams{ID: queued[0].ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel of a queued task: %+v, %v", got, err)
	}
	if h.ranTask(queued[0].ID) {
		t.Fatal("the cancelled queued task ran")
	}
	if _, err := e.OnCancelTask(alice, &a2a.TaskIDParams{ID: queued[0].ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("second cancel: %v", err)
	}
	// The others moved up.
	for i, task := range queued[1:] {
		if pos := get(t, e, alice, task.ID).Metadata[api.MetaQueuePosition]; pos != i+1 {
			t.Fatalf("after the cancel, task %d is at %v, want %d", i+1, pos, i+1)
		}
	}
	page, err := e.ListTasks(alice, ListQuery{State: a2a.TaskStateSubmitted})
	if err != nil || len(page.Tasks) != 2 {
		t.Fatalf("list: %v %v", page, err)
	}
	for _, task := range page.Tasks {
		if task.Metadata[api.MetaQueuePosition] == nil {
			t.Fatalf("a listed queued task has no position: %v", task.Metadata)
		}
	}
	// The running task ends: the next one runs.
	if _, err := e.OnCancelTask(alice, &a2a.TaskIDParams{ID: first.ID}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, a2atest.Wait, "the second queued task running", func() bool { return h.ranTask(queued[1].ID) })
	testkit.WaitFor(t, a2atest.Wait, "the running task without a queue position", func() bool {
		task := get(t, e, alice, queued[1].ID)
		_, has := task.Metadata[api.MetaQueuePosition]
		return task.Status.State == a2a.TaskStateWorking && !has
	})
	if pos := get(t, e, alice, queued[2].ID).Metadata[api.MetaQueuePosition]; pos != 1 {
		t.Fatalf("last task at %v, want 1", pos)
	}
	close(h.release)
	for _, task := range queued[1:] {
		if got := waitTerminal(t, e, alice, task.ID); got.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("task %s ended %s", task.ID, got.Status.State)
		}
	}
	if st := c.Stats(); st.Runs != 0 || st.Queued != 0 || st.Admitted != 3 || st.Cancelled != 1 {
		t.Fatalf("admission after: %+v", st)
	}
}

// Past the queue, a send is shed: no task is created, and the error carries
// the retry-after hint.
func TestShedSendCreatesNoTask(t *testing.T) {
	e, c, h := admittedEngine(t, admit.Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 1}, admit.Policy{})
	ctx := as("spiffe://td/bob", false)
	if _, err := sendAs(t, e, ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := sendAs(t, e, ctx, ""); err != nil {
		t.Fatal(err)
	}
	_, err := sendAs(t, e, ctx, "")
	var shed *admit.ShedError
	if !errors.As(err, &shed) || shed.RetryAfterSeconds() < 1 {
		t.Fatalf("third send: %v, want a shed with a retry hint", err)
	}
	page, _ := e.ListTasks(ctx, ListQuery{})
	if page.TotalSize != 2 || e.InFlight() != 2 {
		t.Fatalf("%d tasks stored, %d live; want 2 (the shed one is not created)", page.TotalSize, e.InFlight())
	}
	if c.Stats().Shed[admit.ReasonQueueFull] != 1 {
		t.Fatalf("shed count %v", c.Stats().Shed)
	}
	close(h.release)
}

// Priority from the message's metadata, capped per caller: a peer's "high"
// is normal, an operator's is high and runs first.
func TestPriorityIsCappedPerCaller(t *testing.T) {
	e, _, h := admittedEngine(t, admit.Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 10}, admit.Policy{})
	peer, op := as("spiffe://td/peer", false), as("spiffe://td/op", true)
	busy, _ := sendAs(t, e, peer, "")
	testkit.WaitFor(t, a2atest.Wait, "the busy task running", func() bool { return h.ranTask(busy.ID) })
	p1, _ := sendAs(t, e, peer, "high")
	p2, _ := sendAs(t, e, peer, "low")
	o1, _ := sendAs(t, e, op, "high")
	if p1.Metadata[api.MetaPriority] != "normal" || p2.Metadata[api.MetaPriority] != "low" || o1.Metadata[api.MetaPriority] != "high" {
		t.Fatalf("priorities: peer high -> %v, peer low -> %v, operator high -> %v", p1.Metadata[api.MetaPriority], p2.Metadata[api.MetaPriority], o1.Metadata[api.MetaPriority])
	}
	if pos := get(t, e, op, o1.ID).Metadata[api.MetaQueuePosition]; pos != 1 {
		t.Fatalf("the operator's high task is at %v, want 1", pos)
	}
	if _, err := sendAs(t, e, peer, "urgent"); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("an unknown priority: %v, want invalid params", err)
	}
	order := []a2a.TaskID{busy.ID, o1.ID, p1.ID, p2.ID}
	for i, id := range order[:3] {
		if _, err := e.OnCancelTask(op, &a2a.TaskIDParams{ID: id}); err != nil {
			t.Fatal(err)
		}
		next := order[i+1]
		testkit.WaitFor(t, a2atest.Wait, "task "+string(next)+" running", func() bool { return h.ranTask(next) })
	}
	if _, err := e.OnCancelTask(op, &a2a.TaskIDParams{ID: p2.ID}); err != nil {
		t.Fatal(err)
	}
}

// A drain ends the queued tasks canceled, without running them, and sheds
// nothing already running.
func TestDrainCancelsQueuedTasks(t *testing.T) {
	e, _, h := admittedEngine(t, admit.Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 4}, admit.Policy{})
	ctx := as("spiffe://td/carol", false)
	running, _ := sendAs(t, e, ctx, "")
	testkit.WaitFor(t, a2atest.Wait, "the first task running", func() bool { return h.ranTask(running.ID) })
	queued, _ := sendAs(t, e, ctx, "")
	e.Drain()
	if got := waitTerminal(t, e, ctx, queued.ID); got.Status.State != a2a.TaskStateCanceled || h.ranTask(queued.ID) {
		t.Fatalf("queued task after the drain: %s (ran: %v)", got.Status.State, h.ranTask(queued.ID))
	}
	if got := get(t, e, ctx, running.ID); got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("running task after the drain: %s", got.Status.State)
	}
	close(h.release)
	waitCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Wait(waitCtx); err != nil {
		t.Fatal(err)
	}
}
