package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/a2a/tasks/storetest"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

func queuedTask(id string) *a2a.Task {
	return &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: now()},
		History:  []*a2a.Message{{ID: "m-" + id, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: id}}}},
		Metadata: map[string]any{api.MetaQueuePosition: 1}}
}

// The shared queue on one database, as two replicas see it: a run queued by
// A is claimed by B (who becomes its runner), in priority order and fair
// across callers; a queued run is removed once; a replica wakes on every
// run queued; and A, whose task B now runs, cannot write it.
func TestSharedQueue(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	a, b := open(t, dsn, storetest.Config{}), open(t, dsn, storetest.Config{})
	ctx := context.Background()
	enqueue := func(id, owner string, prio admit.Priority) {
		t.Helper()
		if err := a.Create(ctx, queuedTask(id), owner); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Enqueue(ctx, tasks.QueuedRun{TaskID: a2a.TaskID(id), Owner: owner, Auth: "token", Priority: prio, Request: []byte(`{"k":"v"}`)}, 8, 4); err != nil {
			t.Fatal(err)
		}
	}
	// alice queues three, bob one, then a high-priority one of alice's.
	enqueue("a1", "alice", admit.Normal)
	testkit.WaitFor(t, 5*time.Second, "B woken by the queued run", func() bool {
		select {
		case <-b.QueueChanged():
			return true
		default:
			return false
		}
	})
	enqueue("a2", "alice", admit.Normal)
	enqueue("a3", "alice", admit.Normal)
	enqueue("b1", "bob", admit.Normal)
	enqueue("h1", "alice", admit.High)
	if all, own, err := b.QueueLength(ctx, "alice"); err != nil || all != 5 || own != 4 {
		t.Fatalf("queue length: %d, alice's %d, %v", all, own, err)
	}
	if by, err := b.QueuedByPriority(ctx); err != nil || len(by) != 2 || by[admit.Normal] != 4 || by[admit.High] != 1 {
		t.Fatalf("queued by priority: %v, %v", by, err)
	}
	// Past the bounds (alice holds her 4), the run is refused and its task
	// deleted; a bound of 5 in all refuses bob's too.
	for _, c := range []struct {
		id, owner, reason string
		capacity          int
	}{{"a5", "alice", admit.ReasonCallerQueueFull, 8}, {"b2", "bob", admit.ReasonQueueFull, 5}} {
		if err := a.Create(ctx, queuedTask(c.id), c.owner); err != nil {
			t.Fatal(err)
		}
		var full *tasks.QueueFullError
		if _, err := a.Enqueue(ctx, tasks.QueuedRun{TaskID: a2a.TaskID(c.id), Owner: c.owner, Request: []byte(`{}`)}, c.capacity, 4); !errors.As(err, &full) || full.Reason != c.reason || full.Queued != 5 {
			t.Fatalf("a run past the bounds: %v", err)
		}
		if _, _, err := a.Get(ctx, a2a.TaskID(c.id)); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Fatalf("the refused run's task: %v", err)
		}
	}
	// Order: alice's high first; then by each caller's virtual position:
	// bob's first (1) before alice's a1 (2, after her high one), then a2, a3.
	want := []string{"h1", "b1", "a1", "a2", "a3"}
	for i, id := range want {
		if pos, err := position(t, a, a2a.TaskID(id)); err != nil || pos != i+1 {
			t.Fatalf("position of %s: %d %v, want %d", id, pos, err, i+1)
		}
	}
	if r, err := b.Runner(ctx, "a1"); err != nil || r != "" {
		t.Fatalf("runner of a queued task: %q %v", r, err)
	}
	// A queued task is nobody's orphan.
	if o, err := b.Orphans(ctx); err != nil || len(o) != 0 {
		t.Fatalf("orphans: %+v %v", o, err)
	}
	// A refused admission claims nothing.
	if _, ok, err := b.ClaimQueued(ctx, func(tasks.QueuedRun) bool { return false }); ok || err != nil {
		t.Fatalf("claim refused by admission: %v %v", ok, err)
	}
	run, ok, err := b.ClaimQueued(ctx, func(tasks.QueuedRun) bool { return true })
	if err != nil || !ok || run.TaskID != "h1" || run.Owner != "alice" || run.Priority != admit.High || run.Auth != "token" || string(run.Request) != `{"k":"v"}` {
		t.Fatalf("claimed %+v %v %v", run, ok, err)
	}
	if r, err := a.Runner(ctx, "h1"); err != nil || r != b.Instance() {
		t.Fatalf("runner of the claimed task: %q %v", r, err)
	}
	// Removed through A: gone from the queue, A runs (and cancels) it.
	if ok, err := a.RemoveQueued(ctx, "a3"); err != nil || !ok {
		t.Fatalf("remove: %v %v", ok, err)
	}
	if ok, err := b.RemoveQueued(ctx, "a3"); err != nil || ok {
		t.Fatalf("a second remove: %v %v", ok, err)
	}
	if pos, _ := position(t, a, "a3"); pos != 0 {
		t.Fatalf("removed run at %d", pos)
	}
	// Fencing: B runs h1 now; A's write is refused, B's is taken.
	h1, _, err := a.Get(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	next := *h1
	next.Status = a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: now()}
	if err := a.Put(ctx, &next); !errors.Is(err, tasks.ErrFenced) || errors.Is(err, tasks.ErrStoreUnavailable) {
		t.Fatalf("A's write to B's task: %v", err)
	}
	if err := b.Put(ctx, &next); err != nil {
		t.Fatalf("B's write to its task: %v", err)
	}
	// Two replicas claiming at once take different runs.
	got := make(chan a2a.TaskID, 2)
	for _, s := range []*Store{a, b} {
		go func() {
			r, ok, err := s.ClaimQueued(ctx, func(tasks.QueuedRun) bool { return true })
			if err != nil || !ok {
				got <- ""
				return
			}
			got <- r.TaskID
		}()
	}
	x, y := <-got, <-got
	if x == "" || y == "" || x == y {
		t.Fatalf("claimed at once: %q and %q", x, y)
	}
}

// position is a task's place in the queue, 0 when it is not queued.
func position(t *testing.T, s *Store, id a2a.TaskID) (int, error) {
	t.Helper()
	pos, err := s.QueuePositions(context.Background(), []a2a.TaskID{id, "not-queued"})
	if len(pos) > 1 {
		t.Fatalf("positions of one queued task at most: %v", pos)
	}
	return pos[id], err
}

func now() *time.Time { t := time.Now(); return &t }

// Fair shares come before priority, as admit/ orders its queue: with two
// run slots in the service and two callers active, a caller who already
// has one run going waits, even at high priority, behind another caller
// below its share; once both are at their share, priority decides.
func TestSharedQueueFairShare(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	a := open(t, dsn, storetest.Config{})
	ctx := context.Background()
	if err := a.SetRunSlots(ctx, 2); err != nil {
		t.Fatal(err)
	}
	// alice has a run going (a root task, its payload retained).
	running := queuedTask("running")
	running.Status.State, running.Metadata = a2a.TaskStateWorking, nil
	if err := a.Create(ctx, running, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := a.Retain(ctx, "running", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		id, owner string
		prio      admit.Priority
	}{{"alice-high", "alice", admit.High}, {"bob-normal", "bob", admit.Normal}, {"bob-low", "bob", admit.Low}} {
		if err := a.Create(ctx, queuedTask(q.id), q.owner); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Enqueue(ctx, tasks.QueuedRun{TaskID: a2a.TaskID(q.id), Owner: q.owner, Priority: q.prio, Request: []byte(`{}`)}, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	// share = ceil(2 slots / 2 callers) = 1: alice (1 going) is at it, bob
	// (none) below: bob's runs first, by priority, then alice's.
	for i, id := range []string{"bob-normal", "bob-low", "alice-high"} {
		if pos, err := position(t, a, a2a.TaskID(id)); err != nil || pos != i+1 {
			t.Fatalf("position of %s: %d %v, want %d", id, pos, err, i+1)
		}
	}
	// With more slots (share 2), alice is below her share too: priority.
	if err := a.SetRunSlots(ctx, 4); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"alice-high", "bob-normal", "bob-low"} {
		if pos, err := position(t, a, a2a.TaskID(id)); err != nil || pos != i+1 {
			t.Fatalf("with 4 slots, position of %s: %d %v, want %d", id, pos, err, i+1)
		}
	}
}

// A task taken from A stays fenced off from A even once the replica that
// took it is gone (an orphan anyone else may resolve), until A claims it
// back.
func TestFencedAfterTheTakerDies(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	a, b := open(t, dsn, storetest.Config{}), open(t, dsn, storetest.Config{})
	ctx := context.Background()
	task := queuedTask("t")
	task.Status.State, task.Metadata = a2a.TaskStateWorking, nil
	if err := a.Create(ctx, task, ""); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Claim(ctx, "t", a.Instance()); err != nil || !ok {
		t.Fatalf("takeover: %v %v", ok, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	next := *task
	next.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: now()}
	if err := a.Put(ctx, &next); !errors.Is(err, tasks.ErrFenced) {
		t.Fatalf("A's write after its taker died: %v", err)
	}
	if ok, err := a.Claim(ctx, "t", b.Instance()); err != nil || !ok {
		t.Fatalf("A claims it back: %v %v", ok, err)
	}
	if err := a.Put(ctx, &next); err != nil {
		t.Fatalf("A's write once it runs the task again: %v", err)
	}
}
