package tasks_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/store/sqlite"
	"github.com/agentd/agentd/a2a/tasks"
)

// What a task's writes cost over SQLite when its first message is large
// (issue 35: over a durable store the engine leaves a running task's large
// message to the store, hollow.go): the store's calls a task makes in a run,
// and the time and allocations of a run and of one write.

// countingStore is the SQLite store counting the engine's calls of it:
// creations, writes (Put, PutEnd, PutKeeping), reads of a task (Get) and
// of its first message (KeptMessage); its other methods, and the
// interfaces they make, are the store's.
type countingStore struct {
	*sqlite.Store
	creates, puts, gets, kept atomic.Int64
}

func (s *countingStore) Create(ctx context.Context, t *a2a.Task, owner string) error {
	s.creates.Add(1)
	return s.Store.Create(ctx, t, owner)
}

func (s *countingStore) Put(ctx context.Context, t *a2a.Task) error {
	s.puts.Add(1)
	return s.Store.Put(ctx, t)
}

func (s *countingStore) PutEnd(ctx context.Context, t *a2a.Task) (int64, error) {
	s.puts.Add(1)
	return s.Store.PutEnd(ctx, t)
}

func (s *countingStore) PutKeeping(ctx context.Context, t *a2a.Task) error {
	s.puts.Add(1)
	return s.Store.PutKeeping(ctx, t)
}

func (s *countingStore) KeptMessage(ctx context.Context, id a2a.TaskID, hollow *a2a.Message) (*a2a.Message, error) {
	s.kept.Add(1)
	return s.Store.KeptMessage(ctx, id, hollow)
}

func (s *countingStore) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, string, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, id)
}

// scriptExec runs a task as its script says: updates times a working status
// and its artifact written whole (1 KiB of text), chunks pieces of streamed
// text shown (tasks.Shower: a model's answer as it streams), then the
// answer's artifact and completed. With hold set, it waits for its context
// instead, and ends the task canceled.
type scriptExec struct {
	updates, chunks int
	hold            bool
}

func (x *scriptExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if x.hold {
		<-ctx.Done()
		return x.Cancel(context.WithoutCancel(ctx), reqCtx, q)
	}
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	text := strings.Repeat("x", 1<<10)
	art := func(text string, appendTo bool) *a2a.TaskArtifactUpdateEvent {
		return &a2a.TaskArtifactUpdateEvent{TaskID: reqCtx.TaskID, ContextID: reqCtx.ContextID, Append: appendTo,
			Artifact: &a2a.Artifact{ID: "answer", Parts: a2a.ContentParts{a2a.TextPart{Text: text}}}}
	}
	for range x.updates {
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		if err := q.Write(ctx, art(text, false)); err != nil {
			return err
		}
	}
	if sh, ok := q.(tasks.Shower); ok {
		for i := range x.chunks {
			if err := sh.Show(ctx, art("a piece of the model's answer ", i > 0)); err != nil {
				return err
			}
		}
	}
	if err := q.Write(ctx, art(text, false)); err != nil {
		return err
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (x *scriptExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// openStore opens a counting SQLite store in a directory of tb's.
func openStore(tb testing.TB) (*countingStore, error) {
	s, err := sqlite.Open(context.Background(), tb.TempDir(), sqlite.Options{})
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { s.Close() })
	return &countingStore{Store: s}, nil
}

// openCounting is openStore for a benchmark.
func openCounting(b *testing.B) *countingStore {
	s, err := openStore(b)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// messageOf is a first message of one text part of size bytes.
func messageOf(size int) *a2a.Message {
	return a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: strings.Repeat("m", size)})
}

// benchSizes are the first message's sizes: under tasks.HollowAbove, and
// the 64 KiB conversation of figure 9.
var benchSizes = []int{1 << 10, 64 << 10}

// BenchmarkTaskRun is one task from its send to its end over SQLite, with
// the engine's default write delay: plain (a blocking send; working, the
// answer, completed), streamed (a streaming send, 100 pieces of the
// model's text shown), updates (a streaming send, 10 working statuses and
// 10 artifacts written whole). It reports the store's writes (puts, after
// the creation) and reads of the task or its first message per task.
func BenchmarkTaskRun(b *testing.B) {
	scripts := []struct {
		name   string
		x      *scriptExec
		stream bool
	}{
		{"plain", &scriptExec{}, false},
		{"streamed", &scriptExec{chunks: 100}, true},
		{"updates", &scriptExec{updates: 10}, true},
	}
	for _, sc := range scripts {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/msg=%dKiB", sc.name, size>>10), func(b *testing.B) {
				s := openCounting(b)
				e := tasks.NewEngine(s, sc.x, nil)
				ctx := context.Background()
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					p := &a2a.MessageSendParams{Message: messageOf(size)}
					if sc.stream {
						var last a2a.Event
						for ev, err := range e.OnSendMessageStream(ctx, p) {
							if err != nil {
								b.Fatal(err)
							}
							last = ev
						}
						if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || st.Status.State != a2a.TaskStateCompleted {
							b.Fatalf("stream ended with %#v", last)
						}
					} else {
						res, err := e.OnSendMessage(ctx, p)
						if err != nil {
							b.Fatal(err)
						}
						if t := res.(*a2a.Task); t.Status.State != a2a.TaskStateCompleted || len(t.History) == 0 || len(t.History[0].Parts[0].(a2a.TextPart).Text) != size {
							b.Fatalf("task %s, history %d", t.Status.State, len(t.History))
						}
					}
					n++
				}
				b.ReportMetric(float64(s.puts.Load())/float64(n), "puts/task")
				b.ReportMetric(float64(s.gets.Load()+s.kept.Load())/float64(n), "reads/task")
			})
		}
	}
}

// BenchmarkRunningTaskWrite is one write of a running task over SQLite
// (Engine.Update of a working status, no write delay), its first message
// of each size.
func BenchmarkRunningTaskWrite(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("msg=%dKiB", size>>10), func(b *testing.B) {
			s := openCounting(b)
			e := tasks.NewEngine(s, &scriptExec{hold: true}, nil, tasks.WithWriteDelay(0))
			ctx := context.Background()
			blocking := false
			res, err := e.OnSendMessage(ctx, &a2a.MessageSendParams{Message: messageOf(size), Config: &a2a.MessageSendConfig{Blocking: &blocking}})
			if err != nil {
				b.Fatal(err)
			}
			task := res.(*a2a.Task)
			defer func() {
				if _, err := e.OnCancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); err != nil {
					b.Error(err)
				}
			}()
			puts, reads := s.puts.Load(), s.gets.Load()+s.kept.Load()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if err := e.Update(ctx, task.ID, a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, nil)); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(s.puts.Load()-puts)/float64(n), "puts/write")
			b.ReportMetric(float64(s.gets.Load()+s.kept.Load()-reads)/float64(n), "reads/write")
		})
	}
}
