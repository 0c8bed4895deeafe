package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/a2a/store/sqlite"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/testkit"
)

// holder is an executor that retains its payload, marks its task working and
// holds it until released; it reruns the same way. It records its runs.
type holder struct {
	release chan struct{}
	mu      sync.Mutex
	runs    []string // "exec ID" or "rerun ID PAYLOAD"
}

func (h *holder) record(s string) {
	h.mu.Lock()
	h.runs = append(h.runs, s)
	h.mu.Unlock()
}

func (h *holder) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.runs)
}

func (h *holder) hold(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	select {
	case <-h.release:
	case <-ctx.Done():
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(context.WithoutCancel(ctx), ev)
}

func (h *holder) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	h.record("exec " + string(reqCtx.TaskID))
	if err := q.(tasks.Retainer).Retain(ctx, []byte(`"payload of `+reqCtx.Message.ID+`"`)); err != nil {
		return err
	}
	return h.hold(ctx, reqCtx, q)
}

func (h *holder) Rerun(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, payload []byte) error {
	h.record("rerun " + string(reqCtx.TaskID) + " " + string(payload))
	return h.hold(ctx, reqCtx, q)
}

func (h *holder) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return nil
}

func (h *holder) LostMetadata() map[string]any {
	return map[string]any{"test/lost": true}
}

// life is one process's engine over the state directory dir.
type life struct {
	store  *sqlite.Store
	engine *tasks.Engine
	exec   *holder
}

func start(t *testing.T, dir string, opts ...tasks.EngineOption) *life {
	t.Helper()
	s, err := sqlite.Open(context.Background(), dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{release: make(chan struct{})}
	l := &life{store: s, engine: tasks.NewEngine(s, h, nil, opts...), exec: h}
	t.Cleanup(func() {
		l.release()
		l.engine.Wait(context.Background())
		s.Close()
	})
	return l
}

func (l *life) release() {
	select {
	case <-l.exec.release:
	default:
		close(l.exec.release)
	}
}

// die ends the life as a SIGKILL would for the store: its instance lock goes
// (the engine's goroutines are left to the test's cleanup).
func (l *life) die(t *testing.T) {
	t.Helper()
	if err := l.store.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRecoverFailRerunRequeue(t *testing.T) {
	for _, policy := range []tasks.RecoverPolicy{tasks.RecoverFail, tasks.RecoverRerun} {
		t.Run(string(policy), func(t *testing.T) {
			dir := t.TempDir()
			ctrl, err := admit.New(admit.Config{Bounds: admit.Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 4}, QueuePerCaller: 4})
			if err != nil {
				t.Fatal(err)
			}
			opts := []tasks.EngineOption{tasks.WithAdmission(ctrl, admit.Policy{})}
			if policy == tasks.RecoverRerun {
				opts = append(opts, tasks.WithEagerRetain())
			}
			first := start(t, dir, opts...)
			running := a2atest.Send(t, first.engine, a2atest.NonBlocking("one"))
			testkit.WaitFor(t, 10*time.Second, "the condition", func() bool { return first.exec.count() == 1 })
			queued := a2atest.Send(t, first.engine, a2atest.NonBlocking("two"))
			if queued.Metadata[api.MetaQueuePosition] != 1 {
				t.Fatalf("second task not queued: %v", queued.Metadata)
			}
			first.die(t)

			ctrl2, err := admit.New(admit.Config{Bounds: admit.Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 4}, QueuePerCaller: 4})
			if err != nil {
				t.Fatal(err)
			}
			second := start(t, dir, tasks.WithAdmission(ctrl2, admit.Policy{}))
			rec, err := second.engine.Recover(context.Background(), policy)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Orphans != 2 || rec.Requeued != 1 {
				t.Fatalf("recovery: %+v", rec)
			}
			if policy == tasks.RecoverFail {
				got, _, _ := second.store.Get(context.Background(), running.ID)
				if got.Status.State != a2a.TaskStateFailed || got.Metadata["test/lost"] != true || rec.Failed != 1 {
					t.Fatalf("the running task under fail: %s %v (%+v)", got.Status.State, got.Metadata, rec)
				}
				// The queued task runs now, as a first execution.
				testkit.WaitFor(t, 10*time.Second, "the condition", func() bool { return second.exec.count() == 1 })
				if second.exec.runs[0] != "exec "+string(queued.ID) {
					t.Fatalf("runs: %v", second.exec.runs)
				}
			} else {
				if rec.Rerun != 1 {
					t.Fatalf("recovery: %+v", rec)
				}
				// The rerun holds the one slot; the requeued task waits for it.
				testkit.WaitFor(t, 10*time.Second, "the condition", func() bool { return second.exec.count() == 1 })
				want := "rerun " + string(running.ID) + ` "payload of ` + running.History[0].ID + `"`
				if second.exec.runs[0] != want {
					t.Fatalf("runs = %v, want %q", second.exec.runs, want)
				}
				got, _, _ := second.store.Get(context.Background(), running.ID)
				if tasks.Attempt(got) != 2 || got.Status.State != a2a.TaskStateWorking {
					t.Fatalf("the rerun task: %s attempt %d", got.Status.State, tasks.Attempt(got))
				}
				q, _, _ := second.store.Get(context.Background(), queued.ID)
				if q.Status.State != a2a.TaskStateSubmitted || fmt.Sprint(q.Metadata[api.MetaQueuePosition]) != "1" {
					t.Fatalf("the requeued task: %s %v", q.Status.State, q.Metadata)
				}
				second.release()
				testkit.WaitFor(t, 10*time.Second, "the condition", func() bool { return second.exec.count() == 2 })
			}
			second.release()
			for _, id := range []a2a.TaskID{running.ID, queued.ID} {
				testkit.WaitFor(t, 10*time.Second, "the condition", func() bool {
					got, _, _ := second.store.Get(context.Background(), id)
					return got.Status.State.Terminal()
				})
			}
			// Nothing is an orphan any more.
			if o, err := second.store.Orphans(context.Background()); err != nil || len(o) != 0 {
				t.Fatalf("orphans after recovery: %v %v", o, err)
			}
		})
	}
}

// An engine on a store that is not durable recovers nothing.
func TestRecoverMemoryStoreNoop(t *testing.T) {
	e := tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), &holder{release: make(chan struct{})}, nil)
	rec, err := e.Recover(context.Background(), tasks.RecoverRerun)
	if err != nil || rec != (tasks.Recovery{}) {
		t.Fatalf("%+v %v", rec, err)
	}
}

// retainProbe records whether the queue it is handed offers Retain (and
// still FollowUps), then completes the task.
type retainProbe struct{ retains, followUps chan bool }

func (p *retainProbe) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	_, r := q.(tasks.Retainer)
	_, f := q.(tasks.FollowUps)
	p.retains <- r
	p.followUps <- f
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (p *retainProbe) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return nil
}

// Only a Durable store's queue offers Retain: over the memory store an
// executor has no payload to encode for a rerun that cannot happen.
func TestRetainerOnlyWithDurableStore(t *testing.T) {
	durable, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { durable.Close() })
	for _, c := range []struct {
		name  string
		store tasks.Store
		want  bool
	}{{"memory", tasks.NewMemoryStore(10, time.Hour), false}, {"sqlite", durable, true}} {
		t.Run(c.name, func(t *testing.T) {
			p := &retainProbe{retains: make(chan bool, 1), followUps: make(chan bool, 1)}
			e := tasks.NewEngine(c.store, p, nil)
			task := a2atest.Send(t, e, a2atest.Msg("probe"))
			if task.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("task = %+v", task.Status)
			}
			if got := <-p.retains; got != c.want {
				t.Fatalf("the queue offers Retain: %v, want %v", got, c.want)
			}
			if !<-p.followUps {
				t.Fatal("the queue lost FollowUps")
			}
			if err := e.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// endOnlyJournal is the embedded store of a process that dies the moment a
// task's terminal write has committed: a notification journaled after that
// write (AddPending of an end) never is.
type endOnlyJournal struct{ *sqlite.Store }

func (j endOnlyJournal) AddPending(ctx context.Context, p tasks.PendingPush) (int64, error) {
	if p.Final {
		return 0, errors.New("the process died after the task's terminal write")
	}
	return j.Store.AddPending(ctx, p)
}

// A webhook hears a task's end although the process that wrote the end died
// before delivering it and before anything after the write ran: the end's
// notification is journaled in the write's transaction (tasks.EndJournal),
// and the next process delivers it.
func TestEndNotifiedAfterDeathAtTheEnd(t *testing.T) {
	var mu sync.Mutex
	var got []string // the states the webhook was told of, in order
	answer := make(chan struct{})
	inFlight := make(chan struct{}, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var snap a2a.Task
		if err := json.NewDecoder(r.Body).Decode(&snap); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		select {
		case <-answer: // the second process: delivered
		default: // the first: held until it dies
			inFlight <- struct{}{}
			select {
			case <-answer:
			case <-r.Context().Done():
				return
			}
			http.Error(w, "too late", http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		got = append(got, string(snap.Status.State))
		mu.Unlock()
	}))
	defer hook.Close()
	policy := tasks.PushPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

	dir := t.TempDir()
	s1, err := sqlite.Open(context.Background(), dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j1 := endOnlyJournal{s1}
	p1 := tasks.NewPusher(tasks.PushSettings{Policy: policy, Journal: j1, Attempts: 1}, j1.ListPush)
	h1 := &holder{release: make(chan struct{})}
	e1 := tasks.NewEngine(j1, h1, nil, tasks.WithPusher(p1))
	task := a2atest.Send(t, e1, a2atest.NonBlocking("one"))
	// Registered once the task works: the end is the one event after it.
	testkit.WaitFor(t, 10*time.Second, "the task working", func() bool {
		got, err := e1.OnGetTask(context.Background(), &a2a.TaskQueryParams{ID: task.ID})
		return err == nil && got.Status.State == a2a.TaskStateWorking
	})
	if _, err := e1.OnSetTaskPushConfig(context.Background(), &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{URL: hook.URL + "/hook"}}); err != nil {
		t.Fatal(err)
	}
	close(h1.release)
	select {
	case <-inFlight: // the end is being delivered: the process dies now
	case <-time.After(10 * time.Second):
		t.Fatal("the end was never delivered to the first process's webhook")
	}
	p1.Close()
	if err := e1.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	close(answer)

	s2, err := sqlite.Open(context.Background(), dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	p2 := tasks.NewPusher(tasks.PushSettings{Policy: policy, Journal: s2}, s2.ListPush)
	defer p2.Close()
	e2 := tasks.NewEngine(s2, &holder{release: make(chan struct{})}, nil, tasks.WithPusher(p2))
	if _, err := e2.Recover(context.Background(), tasks.RecoverFail); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the end delivered by the next process", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0
	})
	if err := p2.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != string(a2a.TaskStateCompleted) {
		t.Fatalf("the webhook was told %v, want [completed]", got)
	}
	if r, err := s2.Inspect(context.Background()); err != nil || r.Pending != 0 {
		t.Fatalf("pending notifications left: %+v %v", r, err)
	}
}
