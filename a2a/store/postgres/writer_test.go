package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/a2a/tasks/storetest"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

func task(id string, state a2a.TaskState) *a2a.Task {
	ts := time.Now().UTC()
	msg := &a2a.Message{ID: id, Role: a2a.MessageRoleUser, TaskID: a2a.TaskID(id), ContextID: "c", Parts: a2a.ContentParts{a2a.TextPart{Text: "hello"}}}
	return &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", History: []*a2a.Message{msg}, Status: a2a.TaskStatus{State: state, Timestamp: &ts}}
}

// One batch of the writer in which one Put is fenced (another replica took
// its task over) and one create repeats an existing id: those two are
// answered with their own errors, every other write of the batch commits,
// in one transaction.
func TestBatchMemberFails(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	dsn := srv.Database(t)
	s := open(t, dsn, storetest.Config{Capacity: 1000})
	for _, id := range []string{"a", "b", "c"} {
		if err := s.Create(ctx, task(id, a2a.TaskStateWorking), "o"); err != nil {
			t.Fatal(err)
		}
	}
	// Replica "other", alive, takes b over (an operator's connection is
	// not fenced).
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `INSERT INTO leases (instance, heartbeat, started) VALUES ('other', now() + interval '1 hour', now());
		UPDATE tasks SET runner = 'other' WHERE id = 'b'`); err != nil {
		t.Fatal(err)
	}

	var batch []*writeOp
	var results []func(error) (int64, error)
	for _, id := range []string{"a", "b", "c"} {
		done := task(id, a2a.TaskStateCompleted)
		snap, err := store.EncodeTask(done)
		if err != nil {
			t.Fatal(err)
		}
		op, res := s.putOp(done, snap, true)
		batch, results = append(batch, op), append(results, res)
	}
	for _, id := range []string{"d", "a"} { // d is new, a exists
		nt := task(id, a2a.TaskStateSubmitted)
		snap, _ := store.EncodeTask(nt)
		batch = append(batch, s.createOp(nt, "o", "", snap))
	}
	for _, o := range batch {
		o.done = make(chan struct{})
	}
	s.runBatch(slices.Clone(batch))

	for i, id := range []string{"a", "b", "c"} {
		<-batch[i].done
		_, err := results[i](batch[i].err)
		switch {
		case id == "b" && !errors.Is(err, tasks.ErrFenced):
			t.Errorf("the fenced put: %v", err)
		case id != "b" && err != nil:
			t.Errorf("put %s: %v", id, err)
		}
	}
	<-batch[3].done
	<-batch[4].done
	if err := s.createResult(batch[3].err); err != nil {
		t.Errorf("create d: %v", err)
	}
	if err := s.createResult(batch[4].err); !isUnique(err) {
		t.Errorf("create a again: %v", err)
	}
	for id, want := range map[string]a2a.TaskState{"a": a2a.TaskStateCompleted, "b": a2a.TaskStateWorking, "c": a2a.TaskStateCompleted, "d": a2a.TaskStateSubmitted} {
		got, _, err := s.Get(ctx, a2a.TaskID(id))
		if err != nil || got.Status.State != want {
			t.Errorf("task %s: %v %v, want %s", id, got, err, want)
		}
	}
	var n, sum int64
	if err := c.QueryRow(ctx, `SELECT (SELECT sum(n) FROM task_count), (SELECT count(*) FROM tasks)`).Scan(&n, &sum); err != nil || n != sum || n != 4 {
		t.Errorf("counted %d tasks, %d stored (%v)", n, sum, err)
	}
}

// The writer's batches under load: sends from many goroutines at once are
// each answered with their own outcome (duplicates of one message among
// them), and the counts hold.
func TestWriterConcurrent(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	s := open(t, srv.Database(t), storetest.Config{Capacity: 1000})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	dups := make(chan bool, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				id := fmt.Sprintf("t-%d-%d", g, i)
				nt := task(id, a2a.TaskStateSubmitted)
				if i == 0 {
					nt.History[0].ID = "the same message" // one of these wins
				}
				err := s.Create(ctx, nt, "o")
				var dup *tasks.DuplicateError
				if errors.As(err, &dup) {
					dups <- true
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				done := *nt
				done.Status.State = a2a.TaskStateCompleted
				if err := s.Put(ctx, &done); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(dups)
	for err := range errs {
		t.Error(err)
	}
	if n := len(dups); n != 15 {
		t.Errorf("%d duplicates of one message sent 16 times", n)
	}
	var n, stored int64
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT sum(n) FROM task_count), (SELECT count(*) FROM tasks WHERE state = 'completed')`).Scan(&n, &stored); err != nil || n != stored || n != 16*19+1 {
		t.Errorf("counted %d tasks, %d completed (%v)", n, stored, err)
	}
}

// blockedExec runs a task until released: working, then one working status
// every few milliseconds until told to stop, then completed.
type blockedExec struct {
	started chan a2a.TaskID
	stop    chan struct{}
}

func (x blockedExec) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	x.started <- rc.TaskID
	for {
		select {
		case <-x.stop:
			final := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
			final.Final = true
			return q.Write(ctx, final)
		case <-time.After(5 * time.Millisecond):
			if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
				return err
			}
		}
	}
}

func (blockedExec) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// A webhook registered through replica B for a task that runs on replica A,
// after it started: A learns of it without reading per event (the
// announcement), delivers the running task's next events, and the final
// one (the terminal write reports the webhook).
func TestPushRegisteredElsewhere(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	dsn := srv.Database(t)
	a, b := open(t, dsn, storetest.Config{Capacity: 1000}), open(t, dsn, storetest.Config{Capacity: 1000})
	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, body.Status.State)
		mu.Unlock()
	}))
	defer hook.Close()
	policy := tasks.PushPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	engine := func(s *Store, x a2asrv.AgentExecutor) *tasks.Engine {
		p := tasks.NewPusher(tasks.PushSettings{Policy: policy, Journal: s, Backoff: time.Millisecond}, s.ListPush)
		t.Cleanup(p.Close)
		return tasks.NewEngine(s, x, nil, tasks.WithPusher(p))
	}
	x := blockedExec{started: make(chan a2a.TaskID, 1), stop: make(chan struct{})}
	ea, eb := engine(a, x), engine(b, x)
	blocking := false
	res, err := ea.OnSendMessage(ctx, &a2a.MessageSendParams{Message: &a2a.Message{ID: "m", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "hi"}}},
		Config: &a2a.MessageSendConfig{Blocking: &blocking}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	<-x.started
	if _, err := eb.OnSetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: id, Config: a2a.PushConfig{URL: hook.URL + "/hook"}}); err != nil {
		t.Fatal(err)
	}
	count := func(state string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range got {
			if s == state {
				n++
			}
		}
		return n
	}
	testkit.WaitFor(t, 10*time.Second, "a working event delivered", func() bool { return count("working") > 0 })
	close(x.stop)
	testkit.WaitFor(t, 10*time.Second, "the completed event delivered", func() bool { return count("completed") == 1 })
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := ea.Wait(wctx); err != nil {
		t.Fatal(err)
	}
}

// A database that stops answering with its connections open (every process
// of the server stopped, as across a partition) fails a write after the
// lease instead of holding it and the writes queued behind it; once the
// server answers again the store writes as before, and closes.
func TestWriteFailsWhenTheDatabaseHangs(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	s, err := Open(ctx, srv.Database(t), Options{Capacity: 1000, LeaseTTL: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Create(ctx, task("hang", a2a.TaskStateWorking), "o"); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	t.Cleanup(srv.Thaw) // before the server's own cleanup stops it
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, task("hang", a2a.TaskStateCompleted)) }()
	select {
	case err := <-done:
		if !errors.Is(err, tasks.ErrStoreUnavailable) {
			t.Fatalf("a write to a hung database: %v, want ErrStoreUnavailable", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a write to a hung database was still waiting after a minute")
	}
	srv.Thaw()
	testkit.WaitFor(t, 30*time.Second, "a write once the database answers", func() bool {
		return s.Put(ctx, task("hang", a2a.TaskStateCompleted)) == nil
	})
	got, _, err := s.Get(ctx, "hang")
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("after the thaw: %+v %v", got, err)
	}
}

// One caller's creates sent at once (made room for together when they share
// a batch) are each answered as alone: with a quota of 5 tasks and 5
// finished ones held, 8 creates evict the 5 and 5 of them are stored, the
// other 3 refused for the quota; the counts hold.
func TestCallerCreatesTogether(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	s, err := Open(ctx, srv.Database(t), Options{Capacity: 1000, QuotaTasks: 5, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		nt := task(fmt.Sprint("old-", i), a2a.TaskStateSubmitted)
		if err := s.Create(ctx, nt, "q"); err != nil {
			t.Fatal(err)
		}
		done := *nt
		done.Status.State = a2a.TaskStateCompleted
		if err := s.Put(ctx, &done); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Create(ctx, task(fmt.Sprint("new-", i), a2a.TaskStateSubmitted), "q")
		}()
	}
	wg.Wait()
	stored, refused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			stored++
		case errors.Is(err, tasks.ErrCallerQuota):
			refused++
		default:
			t.Errorf("create: %v", err)
		}
	}
	if stored != 5 || refused != 3 {
		t.Errorf("%d stored, %d refused for the quota; want 5 and 3", stored, refused)
	}
	var n, held, old int64
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT sum(n) FROM task_count), (SELECT count(*) FROM tasks), (SELECT count(*) FROM tasks WHERE id LIKE 'old-%')`).Scan(&n, &held, &old); err != nil || n != held || held != 5 || old != 0 {
		t.Errorf("counted %d tasks, %d stored, %d of the finished ones left (%v); want 5, 5, 0", n, held, old, err)
	}
}
