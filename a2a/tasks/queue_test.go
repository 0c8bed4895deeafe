package tasks_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/a2a/store/postgres"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

// queueExec is a replica's executor: it records the tasks it runs, marks
// each working and holds it until released (or cancelled).
type queueExec struct {
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	ran     map[a2a.TaskID]bool
}

func newQueueExec() *queueExec {
	return &queueExec{release: make(chan struct{}), ran: map[a2a.TaskID]bool{}}
}

func (x *queueExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	x.mu.Lock()
	x.ran[reqCtx.TaskID] = true
	x.mu.Unlock()
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	state := a2a.TaskStateCompleted
	select {
	case <-x.release:
	case <-ctx.Done():
		state = a2a.TaskStateCanceled
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, state, nil)
	ev.Final = true
	return q.Write(context.WithoutCancel(ctx), ev)
}

func (x *queueExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return nil
}

func (x *queueExec) hasRun(id a2a.TaskID) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.ran[id]
}

func (x *queueExec) free() { x.once.Do(func() { close(x.release) }) }

// drainingClaimer is a replica's store on which the engine drains right
// after it claimed a run from the shared queue, before it starts the run: a
// drain that begins while a claim is under way. drain is set once the
// engine exists; each claimed run's id is sent on claimed.
type drainingClaimer struct {
	*postgres.Store
	drain   atomic.Pointer[func()]
	claimed chan a2a.TaskID
}

func (s *drainingClaimer) ClaimQueued(ctx context.Context, admit func(tasks.QueuedRun) bool) (tasks.QueuedRun, bool, error) {
	run, ok, err := s.Store.ClaimQueued(ctx, admit)
	if ok {
		if d := s.drain.Load(); d != nil {
			(*d)()
		}
		select {
		case s.claimed <- run.TaskID:
		default:
		}
	}
	return run, ok, err
}

// A replica that drains does not start a run it claimed from the shared
// queue: the claim is handed back, and the run waits in the queue, no
// replica's, until another replica claims it and runs it to the end. Two
// engines on one real PostgreSQL database, one run slot each: B's slot is
// taken, so what B accepts next waits in the queue, and A claims it and
// drains before starting it. Before, the claim's launch did not check
// draining: the draining A ran the task (and a drain whose Wait had
// returned could be left with a run going).
func TestDrainingReplicaLeavesClaimedRunQueued(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	ctx := context.Background()
	open := func() *postgres.Store {
		s, err := postgres.Open(ctx, dsn, postgres.Options{LeaseTTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	replica := func(s tasks.Store) (*tasks.Engine, *queueExec) {
		ctrl, err := admit.New(admit.Config{Bounds: admit.Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 4}, QueuePerCaller: 4})
		if err != nil {
			t.Fatal(err)
		}
		x := newQueueExec()
		e := tasks.NewEngine(s, x, nil, tasks.WithAdmission(ctrl, admit.Policy{}))
		t.Cleanup(func() {
			x.free()
			e.Drain()
			wctx, cancel := context.WithTimeout(ctx, a2atest.Wait)
			defer cancel()
			if err := e.Wait(wctx); err != nil {
				t.Errorf("engine not drained: %v", err)
			}
		})
		return e, x
	}
	a := &drainingClaimer{Store: open(), claimed: make(chan a2a.TaskID, 1)}
	b := open()
	ea, xa := replica(a)
	drain := ea.Drain
	a.drain.Store(&drain)
	eb, xb := replica(b)
	position := func(id a2a.TaskID) int {
		pos, err := b.QueuePositions(ctx, []a2a.TaskID{id})
		if err != nil {
			t.Fatal(err)
		}
		return pos[id]
	}

	// B's one slot is taken; the next task it accepts waits in the queue.
	running := a2atest.Send(t, eb, a2atest.NonBlocking("one"))
	testkit.WaitFor(t, a2atest.Wait, "B runs its first task", func() bool { return xb.hasRun(running.ID) })
	queued := a2atest.Send(t, eb, a2atest.NonBlocking("two"))
	if _, ok := queued.Metadata[api.MetaQueuePosition]; !ok || queued.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("the second task is not queued: %s %v", queued.Status.State, queued.Metadata)
	}

	// A, the replica with a free slot, claims it, and drains meanwhile.
	select {
	case id := <-a.claimed:
		if id != queued.ID {
			t.Fatalf("A claimed %s, want %s", id, queued.ID)
		}
	case <-time.After(a2atest.Wait):
		t.Fatal("A did not claim the queued task")
	}

	// The draining A does not start it: the claim goes back to the queue.
	testkit.WaitFor(t, a2atest.Wait, "the claimed run back in the queue, or run by A", func() bool {
		return xa.hasRun(queued.ID) || position(queued.ID) > 0
	})
	if xa.hasRun(queued.ID) {
		t.Fatalf("the draining replica A started task %s, which it claimed from the shared queue", queued.ID)
	}
	if pos := position(queued.ID); pos != 1 {
		t.Fatalf("the run handed back is at position %d, want 1", pos)
	}
	if r, err := b.Runner(ctx, queued.ID); err != nil || r != "" {
		t.Fatalf("runner of the run handed back: %q %v (A is %s), want none", r, err, a.Instance())
	}
	if got, _, err := b.Get(ctx, queued.ID); err != nil || got.Status.State != a2a.TaskStateSubmitted {
		t.Fatalf("the run handed back: %v %v", got, err)
	}
	wctx, cancel := context.WithTimeout(ctx, a2atest.Wait)
	defer cancel()
	if err := ea.Wait(wctx); err != nil || ea.InFlight() != 0 {
		t.Fatalf("A's drain: %v, %d tasks in flight", err, ea.InFlight())
	}

	// B's slot frees: B claims the run and runs it to the end.
	xb.free()
	var got *a2a.Task
	testkit.WaitFor(t, a2atest.Wait, "the queued task run to its end", func() bool {
		got, _, _ = b.Get(ctx, queued.ID)
		return got != nil && got.Status.State.Terminal()
	})
	if got.Status.State != a2a.TaskStateCompleted || !xb.hasRun(queued.ID) || xa.hasRun(queued.ID) {
		t.Fatalf("the queued task: %s, run by B %v, by A %v", got.Status.State, xb.hasRun(queued.ID), xa.hasRun(queued.ID))
	}
	if pos := position(queued.ID); pos != 0 {
		t.Fatalf("the finished task still queued at %d", pos)
	}
}
