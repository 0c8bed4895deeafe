package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/internal/testkit"
)

// refusingStore refuses every write with err while on is set: ErrFenced as
// a store whose task another process took over, ErrStoreUnavailable as a
// database that stopped answering.
type refusingStore struct {
	*MemoryStore
	err error
	on  atomic.Bool
}

func (s *refusingStore) Put(ctx context.Context, t *a2a.Task) error {
	if s.on.Load() {
		return fmt.Errorf("put task: %w", s.err)
	}
	return s.MemoryStore.Put(ctx, t)
}

// A write the store refuses as fenced stops the task's run (its executor's
// context is cancelled with ErrFenced) and the task is no longer live here;
// what the store holds is not overwritten.
func TestFencedWriteStopsTheRun(t *testing.T) {
	st := &refusingStore{MemoryStore: NewMemoryStore(10, time.Hour), err: ErrFenced}
	write := make(chan struct{})
	cause := make(chan error, 1)
	e := NewEngine(st, fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		<-write
		q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)) // refused
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}}, nil)
	ctx := context.Background()
	res, err := e.OnSendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "x"}), Config: &a2a.MessageSendConfig{Blocking: new(bool)}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	testkit.WaitFor(t, 5*time.Second, "the task working", func() bool {
		got, _, _ := st.Get(ctx, id)
		return got.Status.State == a2a.TaskStateWorking
	})
	st.on.Store(true)
	close(write)
	select {
	case c := <-cause:
		if !errors.Is(c, ErrFenced) {
			t.Fatalf("the run stopped with %v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the run was not stopped")
	}
	testkit.WaitFor(t, 5*time.Second, "the task no longer live", func() bool { return e.InFlight() == 0 })
	if got, _, _ := st.Get(ctx, id); got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("the stored task: %s", got.Status.State)
	}
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// fencingStore is a store whose task another replica took over: it
// reports the task on TakenOver, and refuses every write as fenced once on
// is set, recording the states it refused.
type fencingStore struct {
	*MemoryStore
	takenOver chan a2a.TaskID
	on        atomic.Bool
	mu        sync.Mutex
	refused   []a2a.TaskState // guarded by mu
}

func (s *fencingStore) Put(ctx context.Context, t *a2a.Task) error {
	if !s.on.Load() {
		return s.MemoryStore.Put(ctx, t)
	}
	s.mu.Lock()
	s.refused = append(s.refused, t.Status.State)
	s.mu.Unlock()
	return fmt.Errorf("put task: %w: agentd: task %s is run by replica b since it was taken over", ErrFenced, t.ID)
}

func (s *fencingStore) TakenOver() <-chan a2a.TaskID { return s.takenOver }

// A task taken over is fenced once however many times the engine learns
// it (reported taken over, then each write of its stopping run refused),
// and the engine does not end it: no "failed" is written for the run it
// stopped, and nothing says the task was left unfinished. Each refused
// write is logged as such, at Info.
func TestFencedOnceAndNotEnded(t *testing.T) {
	st := &fencingStore{MemoryStore: NewMemoryStore(10, time.Hour), takenOver: make(chan a2a.TaskID, 1)}
	defer close(st.takenOver)
	var logs testkit.Buffer
	stopped := make(chan error, 1)
	e := NewEngine(st, fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		// What a stopping run writes: an event, then its end; both refused.
		q.Write(context.WithoutCancel(ctx), a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil))
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
		ev.Final = true
		q.Write(context.WithoutCancel(ctx), ev)
		return ctx.Err()
	}}, slog.New(slog.NewJSONHandler(&logs, nil)))
	ctx := context.Background()
	res, err := e.OnSendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "x"}), Config: &a2a.MessageSendConfig{Blocking: new(bool)}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	testkit.WaitFor(t, 5*time.Second, "the task working", func() bool {
		got, _, _ := st.Get(ctx, id)
		return got.Status.State == a2a.TaskStateWorking
	})
	st.on.Store(true)
	st.takenOver <- id
	select {
	case c := <-stopped:
		if !errors.Is(c, ErrFenced) {
			t.Fatalf("the run stopped with %v", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the run was not stopped")
	}
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	refused := slices.Clone(st.refused)
	st.mu.Unlock()
	if len(refused) != 2 || slices.Contains(refused, a2a.TaskStateFailed) {
		t.Fatalf("the writes of the fenced run: %v, want its own two (working, canceled) and no failed end", refused)
	}
	if n := len(logs.Records("task taken over by another replica: stopping its tree, writing nothing more to it")); n != 1 {
		t.Fatalf("fenced %d times, want once:\n%s", n, logs.String())
	}
	if n := len(logs.Records("write of a task taken over refused")); n != 2 {
		t.Fatalf("%d refused writes logged, want 2:\n%s", n, logs.String())
	}
	for _, msg := range []string{"forcing task to failed", "task left unfinished in the store", "running task not written: retrying"} {
		if len(logs.Records(msg)) > 0 {
			t.Fatalf("a task taken over logged %q:\n%s", msg, logs.String())
		}
	}
}

// A store unavailable for longer than a running task's events wait for it:
// the task fails, and that end is stored once the store is back (its
// process lives on, so no recovery resolves it: it stayed working).
func TestEndStoredOnceTheStoreIsBack(t *testing.T) {
	st := &refusingStore{MemoryStore: NewMemoryStore(10, time.Hour), err: ErrStoreUnavailable}
	finish := make(chan struct{})
	e := NewEngine(st, fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		<-finish
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev) // refused: the store is down
	}}, nil, WithStoreRetry(50*time.Millisecond))
	ctx := context.Background()
	res, err := e.OnSendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "x"}), Config: &a2a.MessageSendConfig{Blocking: new(bool)}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	testkit.WaitFor(t, 5*time.Second, "the task working", func() bool {
		got, _, _ := st.Get(ctx, id)
		return got.Status.State == a2a.TaskStateWorking
	})
	st.on.Store(true)
	close(finish)
	testkit.WaitFor(t, 5*time.Second, "the task no longer live", func() bool { return e.InFlight() == 0 })
	st.on.Store(false)
	testkit.WaitFor(t, 10*time.Second, "the task's end stored", func() bool {
		got, _, _ := st.Get(ctx, id)
		return got.Status.State == a2a.TaskStateFailed
	})
	if got, _, _ := st.Get(ctx, id); got.Metadata["test/forced"] != "crashed" {
		t.Fatalf("the stored end: %v", got.Metadata)
	}
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// lostStore forgets every task it creates, as SQLite's staged creation whose
// commit failed (a full disk): the task's writes find no such task.
type lostStore struct{ *MemoryStore }

func (s lostStore) Put(ctx context.Context, t *a2a.Task) error {
	return fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, t.ID)
}

func (s lostStore) Retain(ctx context.Context, id a2a.TaskID, payload []byte) error {
	return fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id)
}

// A blocking send whose task the store lost is answered with the store's
// unavailability (nothing was stored), not "task not found" for the task it
// had just created.
func TestLostCreationIsUnavailability(t *testing.T) {
	e := NewEngine(lostStore{NewMemoryStore(10, time.Hour)}, fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}}, nil)
	ctx := context.Background()
	_, err := e.OnSendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "x"})})
	if !errors.Is(err, ErrStoreUnavailable) || errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("a blocking send whose task the store lost: %v", err)
	}
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
