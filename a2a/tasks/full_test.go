package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/a2a/store/sqlite"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/testkit"
)

// countingExec counts its runs and completes each at once.
type countingExec struct{ runs atomic.Int64 }

func (x *countingExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	x.runs.Add(1)
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (x *countingExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// Non-blocking sends and streams at once on an SQLite store whose disk is
// full: a send answered with the store's unavailability has started no run
// (its retry would run the work a second time, and its message id was not
// kept), and a send answered with a task has its task stored. Before, the
// run started with the task's staged creation, before the commit that
// failed.
func TestFullDiskRefusedSendRunsNothing(t *testing.T) {
	dir := testkit.SmallFS(t, 1<<20)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := &countingExec{}
	e := tasks.NewEngine(s, x, nil)
	testkit.Fill(t, dir, 0)
	text := strings.Repeat("x", 64<<10) // more than the WAL's frames hold
	const sends, streams = 12, 4
	var mu sync.Mutex
	var acked []a2a.TaskID
	refused := 0
	answer := func(id a2a.TaskID, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			acked = append(acked, id)
			return
		}
		if !errors.Is(err, tasks.ErrStoreUnavailable) {
			t.Errorf("a send on a full disk: %v, not the store's unavailability", err)
		}
		refused++
	}
	var wg sync.WaitGroup
	for i := range sends + streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			blocking := false
			p := &a2a.MessageSendParams{Message: &a2a.Message{ID: fmt.Sprint("m", i), Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: text}}},
				Config: &a2a.MessageSendConfig{Blocking: &blocking}}
			if i < sends {
				res, err := e.OnSendMessage(ctx, p)
				var id a2a.TaskID
				if err == nil {
					id = res.(*a2a.Task).ID
				}
				answer(id, err)
				return
			}
			for ev, err := range e.OnSendMessageStream(ctx, p) {
				var id a2a.TaskID
				if err == nil {
					id = ev.(*a2a.Task).ID
				}
				answer(id, err)
				break
			}
		}()
	}
	wg.Wait()
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.Wait(waitCtx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sends on a full disk: %d acknowledged, %d refused, %d runs", sends+streams, len(acked), refused, x.runs.Load())
	if refused == 0 {
		t.Fatal("no send was refused: the disk was never full")
	}
	if n := x.runs.Load(); n > int64(len(acked)) {
		t.Fatalf("%d runs for %d acknowledged sends: refused sends ran", n, len(acked))
	}
	for _, id := range acked {
		if _, _, err := s.Get(ctx, id); err != nil {
			t.Errorf("acknowledged task %s: %v", id, err)
		}
	}
}

// stepExec, once begin is closed, reports its task working with a status
// message of text (a snapshot larger than a full disk has room for), sends
// that write's error on moved, and completes the task once release is
// closed.
type stepExec struct {
	text           string
	begin, release chan struct{}
	moved          chan error
	runs           atomic.Int64
}

func (x *stepExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	x.runs.Add(1)
	<-x.begin
	msg := a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: x.text})
	x.moved <- q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, msg))
	<-x.release
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (x *stepExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// A non-blocking send whose run has started is answered with its task,
// whatever the run's first writes meet: here the disk fills up once the
// task's creation is committed and its run has started, and the run
// reports a change (written later: no one sees it yet) before the send is
// answered. Before, the answer wrote that change first, failed on the full
// disk and answered the store's unavailability, for a task stored and
// running: a send refused whose work had started (and that its retry would
// run again), what the e2e TestStateDirFullNonBlocking saw under load,
// where the run got ahead of its send's answer.
func TestFullDiskSendAnsweredOnceRunStarted(t *testing.T) {
	dir := testkit.SmallFS(t, 1<<20)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := &stepExec{text: strings.Repeat("x", 256<<10), begin: make(chan struct{}), release: make(chan struct{}), moved: make(chan error, 1)}
	e := tasks.NewEngine(s, x, nil, tasks.WithStoreWait(200*time.Millisecond))
	var filler string
	tasks.SetStartedHook(e, func() {
		// The run has started: the disk fills up, and the run reports
		// working before the send is answered.
		filler = testkit.Fill(t, dir, 0)
		close(x.begin)
		if err := <-x.moved; err != nil {
			t.Errorf("the run's working status: %v", err)
		}
	})
	res, err := e.OnSendMessage(ctx, a2atest.NonBlocking("hi"))
	os.Remove(filler)
	close(x.release)
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.Wait(waitCtx); err != nil {
		t.Fatal(err)
	}
	if x.runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", x.runs.Load())
	}
	if err != nil {
		t.Fatalf("a send whose run started was answered %v", err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateSubmitted {
		t.Errorf("answered with state %s, want the synced creation's %s", task.Status.State, a2a.TaskStateSubmitted)
	}
	got, _, err := s.Get(ctx, task.ID)
	if err != nil {
		t.Fatalf("acknowledged task %s: %v", task.ID, err)
	}
	if got.Status.State != a2a.TaskStateCompleted {
		t.Errorf("stored task %s is %s, want %s", task.ID, got.Status.State, a2a.TaskStateCompleted)
	}
}

// A non-blocking follow-up that joined its task is answered with the task,
// whatever the run's writes meet after: here the disk fills up once the
// follow-up is stored, and the run reports a change (written later) before
// the send is answered. Before, the answer wrote that change, failed on
// the full disk and answered the store's unavailability for a follow-up
// stored and queued for the run's next turn.
func TestFullDiskFollowUpAnsweredOnceQueued(t *testing.T) {
	dir := testkit.SmallFS(t, 1<<20)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := &stepExec{text: strings.Repeat("x", 256<<10), begin: make(chan struct{}), release: make(chan struct{}), moved: make(chan error, 1)}
	e := tasks.NewEngine(s, x, nil, tasks.WithStoreWait(200*time.Millisecond))
	first, err := e.OnSendMessage(ctx, a2atest.NonBlocking("hi"))
	if err != nil {
		t.Fatal(err)
	}
	id := first.(*a2a.Task).ID
	var filler string
	tasks.SetFollowedHook(e, func() {
		// The follow-up is stored and queued: the disk fills up, and the
		// run reports working before the send is answered.
		filler = testkit.Fill(t, dir, 0)
		close(x.begin)
		if err := <-x.moved; err != nil {
			t.Errorf("the run's working status: %v", err)
		}
	})
	p := a2atest.NonBlocking("more")
	p.Message.TaskID = id
	res, err := e.OnSendMessage(ctx, p)
	os.Remove(filler)
	close(x.release)
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.Wait(waitCtx); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("a follow-up stored and queued was answered %v", err)
	}
	task := res.(*a2a.Task)
	if n := len(task.History); n != 2 || task.History[1].ID != p.Message.ID {
		t.Errorf("answered with a history of %d messages, want the follow-up second", n)
	}
	got, _, err := s.Get(ctx, id)
	if err != nil {
		t.Fatalf("acknowledged task %s: %v", id, err)
	}
	if !slices.ContainsFunc(got.History, func(m *a2a.Message) bool { return m.ID == p.Message.ID }) {
		t.Errorf("stored task %s lacks the follow-up", id)
	}
}
