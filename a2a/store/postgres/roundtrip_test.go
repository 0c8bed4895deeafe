package postgres

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/pgtest"
)

// roundTrips counts the round trips of a store's connections: each query
// outside a batch is one, a batch is one. It is safe for concurrent use.
type roundTrips struct {
	mu    sync.Mutex
	on    bool
	n     int
	stmts int
	what  map[string]int // first words of each round trip's statements
}

func (r *roundTrips) count(what string, stmts int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.on {
		return
	}
	r.n++
	r.stmts += stmts
	r.what[what]++
}

func (r *roundTrips) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.n, r.stmts, r.what = true, 0, 0, map[string]int{}
}

func (r *roundTrips) stop() (int, int, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.n, r.stmts, r.what
}

// words is a statement's first words, to tell round trips apart.
func words(sql string) string {
	f := strings.Fields(sql)
	return strings.Join(f[:min(len(f), 4)], " ")
}

type batchKey struct{}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if ctx.Value(batchKey{}) == nil {
		r.count(words(d.SQL), 1)
	}
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var w []string
	for _, q := range d.Batch.QueuedQueries {
		w = append(w, words(q.SQL))
	}
	r.count("batch["+strings.Join(w, "; ")+"]", len(w))
	return context.WithValue(ctx, batchKey{}, true)
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// instantExec emits what agentd's executor emits for an instant provider's
// send: the payload retained, working, the distillate artifact, completed.
type instantExec struct{}

func (instantExec) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	if r, ok := q.(tasks.Retainer); ok {
		if err := r.Retain(ctx, []byte(`{"payload":"the delegation"}`)); err != nil {
			return err
		}
	}
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(rc, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	art := &a2a.TaskArtifactUpdateEvent{TaskID: rc.TaskID, ContextID: rc.ContextID, LastChunk: true,
		Artifact: &a2a.Artifact{ID: a2a.ArtifactID(string(rc.TaskID) + ".distillate"), Parts: a2a.ContentParts{a2a.TextPart{Text: "ok"}}}}
	if err := q.Write(ctx, art); err != nil {
		return err
	}
	final := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
	final.Final = true
	return q.Write(ctx, final)
}

func (instantExec) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// sendEngine is an engine as agentd serve builds it over s: push
// notifications with the store's journal, admission control of a 1 GiB pod.
func sendEngine(t testing.TB, s *Store) *tasks.Engine {
	t.Helper()
	d := admit.Derive(1<<30, 2)
	adm, err := admit.New(admit.Config{Bounds: d.Bounds, Ceiling: d.Ceiling})
	if err != nil {
		t.Fatal(err)
	}
	pusher := tasks.NewPusher(tasks.PushSettings{Journal: s}, s.ListPush)
	t.Cleanup(func() { pusher.Close() })
	return tasks.NewEngine(s, instantExec{}, nil, tasks.WithPusher(pusher), tasks.WithAdmission(adm, admit.Policy{}))
}

func send(ctx context.Context, e *tasks.Engine, id string) error {
	msg := &a2a.Message{ID: id, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "hello"}}}
	res, err := e.OnSendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if err != nil {
		return err
	}
	if tk, ok := res.(*a2a.Task); !ok || tk.Status.State != a2a.TaskStateCompleted {
		return fmt.Errorf("send %s: %#v", id, res)
	}
	return nil
}

// The round trips of one message/send of an instant agent through the
// engine, one sender at a time: two (the create's batch, the final Put's
// batch, which reports the task's webhooks); the breakdown is logged.
func TestRoundTripsPerSend(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	rt := &roundTrips{}
	s, err := Open(ctx, srv.Database(t), Options{Capacity: 1000, Retention: time.Hour, LeaseTTL: time.Minute, tracer: rt})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := sendEngine(t, s)
	for i := range 20 { // the statements prepared, the pool warm
		if err := send(ctx, e, fmt.Sprint("warm-", i)); err != nil {
			t.Fatal(err)
		}
	}
	const sends = 100
	rt.start()
	for i := range sends {
		if err := send(ctx, e, fmt.Sprint("send-", i)); err != nil {
			t.Fatal(err)
		}
	}
	n, stmts, what := rt.stop()
	var lines []string
	for w, c := range what {
		lines = append(lines, fmt.Sprintf("%6.2f  %s", float64(c)/sends, w))
	}
	sort.Strings(lines)
	t.Logf("%.2f round trips, %.2f statements per send:\n%s", float64(n)/sends, float64(stmts)/sends, strings.Join(lines, "\n"))
	// Besides a send's own, the replica's background reads (the shared
	// queue's check, once a second) may fall within the window.
	if per := float64(n) / sends; per > 2.1 {
		t.Errorf("%.2f round trips per send, want 2", per)
	}
}
