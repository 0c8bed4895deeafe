package tasks

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
)

// turnExec works until release closes, then takes the follow-ups and answers
// with how many turns it saw.
func turnExec(release <-chan struct{}, turns chan<- int) fakeExec {
	return fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil))
		select {
		case <-release:
		case <-ctx.Done():
		}
		n := 1
		for {
			more := q.(FollowUps).TakeFollowUp(true)
			if len(more) == 0 {
				break
			}
			n += len(more)
		}
		turns <- n
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}}
}

func TestFollowUpsJoinTheRunningTask(t *testing.T) {
	release, turns := make(chan struct{}), make(chan int, 1)
	e := NewEngine(NewMemoryStore(10, time.Hour), turnExec(release, turns), nil)
	ctx := context.Background()
	task := a2atest.Send(t, e, a2atest.NonBlocking("first"))

	follow := a2atest.NonBlocking("second")
	follow.Message.TaskID = task.ID
	got := a2atest.Send(t, e, follow)
	if got.ID != task.ID || len(got.History) != 2 || got.Status.State.Terminal() {
		t.Fatalf("follow-up answer: id %s, %d history, %s", got.ID, len(got.History), got.Status.State)
	}
	if got.History[1].ContextID != task.ContextID || got.History[1].TaskID != task.ID {
		t.Fatalf("follow-up not bound to the task: %+v", got.History[1])
	}

	wrongCtx := a2atest.NonBlocking("third")
	wrongCtx.Message.TaskID, wrongCtx.Message.ContextID = task.ID, "other"
	if _, err := e.OnSendMessage(ctx, wrongCtx); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("mismatched context: %v", err)
	}
	close(release)
	if n := <-turns; n != 2 {
		t.Fatalf("the executor saw %d turns, want 2", n)
	}
	a2atest.WaitTerminal(t, e, task.ID)

	late := a2atest.NonBlocking("too late")
	late.Message.TaskID = task.ID
	if _, err := e.OnSendMessage(ctx, late); !errors.Is(err, a2a.ErrUnsupportedOperation) {
		t.Fatalf("follow-up to a finished task: %v", err)
	}
	unknown := a2atest.NonBlocking("who")
	unknown.Message.TaskID = "nope"
	if _, err := e.OnSendMessage(ctx, unknown); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("follow-up to an unknown task: %v", err)
	}
}

func TestFollowUpLimit(t *testing.T) {
	release, turns := make(chan struct{}), make(chan int, 1)
	defer close(release)
	e := NewEngine(NewMemoryStore(10, time.Hour), turnExec(release, turns), nil)
	task := a2atest.Send(t, e, a2atest.NonBlocking("first"))
	for i := 0; i <= MaxFollowUps; i++ {
		p := a2atest.NonBlocking("more")
		p.Message.TaskID = task.ID
		_, err := e.OnSendMessage(context.Background(), p)
		if i < MaxFollowUps && err != nil {
			t.Fatalf("follow-up %d: %v", i, err)
		}
		if i == MaxFollowUps && !errors.Is(err, a2a.ErrUnsupportedOperation) {
			t.Fatalf("follow-up past the limit: %v", err)
		}
	}
}

func TestSendWaitBoundsABlockingSend(t *testing.T) {
	release, turns := make(chan struct{}), make(chan int, 1)
	e := NewEngine(NewMemoryStore(10, time.Hour), turnExec(release, turns), nil, WithSendWait(20*time.Millisecond))
	got := a2atest.Send(t, e, a2atest.Msg("slow")) // blocking
	if got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("a bounded blocking send answered %s, want working", got.Status.State)
	}
	close(release)
	<-turns
	a2atest.WaitTerminal(t, e, got.ID)

	// Without the bound a blocking send waits for the end.
	release2, turns2 := make(chan struct{}), make(chan int, 1)
	e2 := NewEngine(NewMemoryStore(10, time.Hour), turnExec(release2, turns2), nil)
	done := make(chan *a2a.Task, 1)
	go func() {
		res, _ := e2.OnSendMessage(context.Background(), a2atest.Msg("slow"))
		done <- res.(*a2a.Task)
	}()
	select {
	case <-done:
		t.Fatal("an unbounded blocking send returned before the task ended")
	case <-time.After(50 * time.Millisecond):
	}
	close(release2)
	if got := <-done; got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state %s", got.Status.State)
	}
}

func TestEnginePushNotifications(t *testing.T) {
	hook := &webhook{}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	store := NewMemoryStore(10, time.Hour)
	release, turns := make(chan struct{}), make(chan int, 1)
	pusher := NewPusher(PushSettings{Policy: loopbackOK(), Backoff: time.Millisecond}, store.ListPush)
	defer pusher.Close()
	e := NewEngine(store, turnExec(release, turns), nil, WithPusher(pusher))
	if !e.PushEnabled() {
		t.Fatal("push not enabled")
	}
	ctx := context.Background()

	bad := a2atest.NonBlocking("x")
	bad.Config.PushConfig = &a2a.PushConfig{URL: "http://10.0.0.1/hook"}
	if _, err := e.OnSendMessage(ctx, bad); !errors.Is(err, a2a.ErrInvalidParams) || !errors.Is(err, ErrPushRefused) {
		t.Fatalf("private webhook in send: %v", err)
	}
	if store.Len() != 0 {
		t.Fatal("a refused send created a task")
	}

	p := a2atest.NonBlocking("x")
	p.Config.PushConfig = &a2a.PushConfig{URL: srv.URL, Token: "tok"}
	task := a2atest.Send(t, e, p)
	cfg, err := e.OnGetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: DefaultPushConfigID})
	if err != nil || cfg.Config.URL != srv.URL {
		t.Fatalf("config from the send: %+v %v", cfg, err)
	}
	if _, err := e.OnSetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{URL: "http://169.254.169.254/"}}); !errors.Is(err, ErrPushRefused) {
		t.Fatalf("link-local webhook: %v", err)
	}
	v1ctx := WithVersion(ctx, Version10)
	set, err := e.OnSetTaskPushConfig(v1ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{URL: srv.URL + "/v1"}})
	if err != nil || set.Config.ID == "" || set.Config.ID == DefaultPushConfigID {
		t.Fatalf("1.0 registration: %+v %v", set, err)
	}
	list, _ := e.OnListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
	if len(list) != 2 {
		t.Fatalf("%d configs", len(list))
	}
	close(release)
	<-turns
	a2atest.WaitTerminal(t, e, task.ID)
	ctxW, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.Wait(ctxW); err != nil {
		t.Fatal(err)
	}
	// The completed event reached both webhooks; the token went with each.
	hook.mu.Lock()
	defer hook.mu.Unlock()
	var v03, v10 int
	for i, r := range hook.got {
		if r.URL.Path == "/v1" {
			v10++
		} else {
			v03++
			if r.Header.Get("X-A2A-Notification-Token") != "tok" {
				t.Errorf("delivery %d without the token", i)
			}
		}
	}
	if v03 == 0 || v10 == 0 {
		t.Fatalf("deliveries: %d to the 0.3 hook, %d to the 1.0 hook", v03, v10)
	}
	if err := e.OnDeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: task.ID, ConfigID: set.Config.ID}); err != nil {
		t.Fatal(err)
	}
}

func TestPushOffWithoutPusher(t *testing.T) {
	e := NewEngine(NewMemoryStore(10, time.Hour), fakeExec{}, nil)
	if _, err := e.OnSetTaskPushConfig(context.Background(), &a2a.TaskPushConfig{TaskID: "x"}); !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
		t.Fatal(err)
	}
	p := a2atest.Msg("x")
	p.Config = &a2a.MessageSendConfig{PushConfig: &a2a.PushConfig{URL: "https://8.8.8.8/"}}
	if _, err := e.OnSendMessage(context.Background(), p); !errors.Is(err, a2a.ErrPushNotificationNotSupported) {
		t.Fatalf("send with push config and push off: %v", err)
	}
}

func TestListTasksIsScopedToTheCaller(t *testing.T) {
	e := NewEngine(NewMemoryStore(10, time.Hour), fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}}, nil)
	alice, cc := a2asrv.WithCallContext(context.Background(), nil)
	cc.User = &a2asrv.AuthenticatedUser{UserName: "alice"}
	res, err := e.OnSendMessage(alice, a2atest.Msg("mine"))
	if err != nil {
		t.Fatal(err)
	}
	a2atest.Send(t, e, a2atest.Msg("anonymous"))
	page, _ := e.ListTasks(alice, ListQuery{})
	if len(page.Tasks) != 1 || page.Tasks[0].ID != res.(*a2a.Task).ID {
		t.Fatalf("alice lists %v", page.Tasks)
	}
	page, _ = e.ListTasks(context.Background(), ListQuery{})
	if len(page.Tasks) != 1 || page.Tasks[0].ID == res.(*a2a.Task).ID {
		t.Fatalf("an anonymous caller lists %v", page.Tasks)
	}
	// An operator, who may read every task, lists them all.
	op, occ := a2asrv.WithCallContext(context.Background(), nil)
	occ.User = &operatorUser{a2asrv.AuthenticatedUser{UserName: "root"}}
	if page, _ = e.ListTasks(op, ListQuery{}); len(page.Tasks) != 2 {
		t.Fatalf("an operator lists %v", page.Tasks)
	}
}

// ListTasks checks the query before the store sees it: a page size in
// 1..MaxPageSize (0 is the default) and no negative history length.
func TestListTasksChecksTheQuery(t *testing.T) {
	store := NewMemoryStore(10, time.Hour)
	e := NewEngine(store, fakeExec{}, nil)
	ctx := context.Background()
	if err := store.Create(ctx, &a2a.Task{ID: "t", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, ""); err != nil {
		t.Fatal(err)
	}
	neg := -1
	for _, q := range []ListQuery{{PageSize: MaxPageSize + 1}, {PageSize: -1}, {HistoryLength: &neg}} {
		if _, err := e.ListTasks(ctx, q); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("ListTasks(%+v): %v, want invalid params", q, err)
		}
	}
	page, err := e.ListTasks(ctx, ListQuery{})
	if err != nil || page.PageSize != DefaultPageSize || len(page.Tasks) != 1 {
		t.Fatalf("the zero query: %+v %v", page, err)
	}
}

type operatorUser struct{ a2asrv.AuthenticatedUser }

func (operatorUser) Operator() bool { return true }

// A drain that begins while a message is being accepted waits for that
// message's task: the draining check and counting the task for Wait are one
// step. (Before, a task could pass the check, the drain begin and Wait return,
// and only then the task's executor be counted.)
func TestDrainWaitsForATaskAcceptedAsItBegins(t *testing.T) {
	release := make(chan struct{})
	store := NewMemoryStore(10, time.Hour)
	e := NewEngine(store, fakeExec{func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		<-release
		ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
		ev.Final = true
		return q.Write(ctx, ev)
	}}, nil)
	var once sync.Once
	var waited error
	store.now = func() time.Time {
		// The store's first read of the clock is the new task's Create,
		// after the engine decided to accept the message.
		once.Do(func() {
			e.Drain()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			waited = e.Wait(ctx) // the executor cannot have run yet
		})
		return time.Now()
	}
	task := a2atest.Send(t, e, a2atest.NonBlocking("accepted"))
	if !errors.Is(waited, context.DeadlineExceeded) {
		t.Fatalf("Wait during the acceptance returned %v; want it to wait for the accepted task", waited)
	}
	if _, err := e.OnSendMessage(context.Background(), a2atest.NonBlocking("late")); !errors.Is(err, ErrDraining) {
		t.Fatalf("a message after the drain began: %v", err)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := store.Get(ctx, task.ID); !got.Status.State.Terminal() {
		t.Fatalf("Wait returned with the task %s", got.Status.State)
	}
}

// ContextOf: a live task's contextId from memory, a stored one's from the
// store, and an unknown task's read fails naming the task.
func TestContextOf(t *testing.T) {
	ctx := context.Background()
	store := NewMemoryStore(10, time.Hour)
	e := NewEngine(store, fakeExec{}, nil)
	if err := e.OpenTask(ctx, &a2a.Task{ID: "live", ContextID: "ctx-live", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, ""); err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, &a2a.Task{ID: "stored", ContextID: "ctx-stored", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}, ""); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[a2a.TaskID]string{"live": "ctx-live", "stored": "ctx-stored"} {
		if got, err := e.ContextOf(ctx, id); err != nil || got != want {
			t.Fatalf("ContextOf(%s) = %q, %v; want %q", id, got, err, want)
		}
	}
	if _, err := e.ContextOf(ctx, "none"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("ContextOf(none): %v, want a2a.ErrTaskNotFound", err)
	}
}
