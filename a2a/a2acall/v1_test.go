// An external test package: these tests serve agentd's own front (server),
// which imports a2arest, which imports a2acall.
package a2acall_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/server"
)

// serveAgentd runs agentd's own front (JSON-RPC 0.3 and 1.0) over exec on
// loopback, push notifications to loopback allowed, and returns its URL.
func serveAgentd(t *testing.T, exec *a2atest.Executor) string {
	t.Helper()
	store := tasks.NewMemoryStore(100, time.Hour)
	pusher := tasks.NewPusher(tasks.PushSettings{Policy: tasks.PushPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}, store.ListPush)
	t.Cleanup(pusher.Close)
	engine := tasks.NewEngine(store, exec, nil, tasks.WithPusher(pusher))
	srv := httptest.NewServer(server.Handler(server.Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/", Push: true})}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// Both JSON-RPC clients, against agentd's front: send, get, stream, the
// push config calls (set, get, list, delete), and the errors as a2a-go's
// sentinels.
func TestJSONRPCClientsBothVersions(t *testing.T) {
	url := serveAgentd(t, &a2atest.Executor{})
	for _, tc := range []struct {
		name string
		c    a2acall.Transport
	}{
		{"0.3", a2acall.New(url, &http.Client{Timeout: a2atest.Wait}, a2acall.Options{})},
		{"1.0", a2acall.NewV1(url, &http.Client{Timeout: a2atest.Wait}, a2acall.Options{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := a2acall.CtxT(t)
			res, err := tc.c.SendMessage(ctx, a2atest.Msg("hi"))
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateCompleted || a2acall.ArtifactText(task) != "echo: hi" {
				t.Fatalf("send: %#v", res)
			}
			got, err := tc.c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
			if err != nil || got.ID != task.ID || a2acall.ArtifactText(got) != "echo: hi" || len(got.History) == 0 {
				t.Fatalf("get: %+v, %v", got, err)
			}
			var last a2a.Event
			for ev, err := range tc.c.SendStreamingMessage(ctx, a2atest.Msg("streamed")) {
				if err != nil {
					t.Fatal(err)
				}
				last = ev
			}
			if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || st.Status.State != a2a.TaskStateCompleted || !st.Final {
				t.Fatalf("the stream's last event: %#v", last)
			}

			cfg := &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{ID: "hook", URL: "http://127.0.0.1:9/hook", Token: "tok",
				Auth: &a2a.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: "c"}}}
			set, err := tc.c.SetTaskPushConfig(ctx, cfg)
			if err != nil || set.TaskID != task.ID || set.Config.ID != "hook" || set.Config.URL != cfg.Config.URL || set.Config.Auth == nil || set.Config.Auth.Schemes[0] != "Bearer" {
				t.Fatalf("set push config: %+v, %v", set, err)
			}
			one, err := tc.c.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "hook"})
			if err != nil || one.Config.Token != "tok" {
				t.Fatalf("get push config: %+v, %v", one, err)
			}
			list, err := tc.c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID})
			if err != nil || len(list) != 1 || list[0].Config.ID != "hook" {
				t.Fatalf("list push configs: %+v, %v", list, err)
			}
			if err := tc.c.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: task.ID, ConfigID: "hook"}); err != nil {
				t.Fatalf("delete push config: %v", err)
			}
			if list, err := tc.c.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID}); err != nil || len(list) != 0 {
				t.Fatalf("list after delete: %+v, %v", list, err)
			}

			_, err = tc.c.GetTask(ctx, &a2a.TaskQueryParams{ID: "no-such-task"})
			var rpc *a2acall.Error
			if !errors.Is(err, a2a.ErrTaskNotFound) || !errors.As(err, &rpc) || rpc.Code != -32001 {
				t.Fatalf("get of an unknown task: %v", err)
			}
			_, err = tc.c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
			if !errors.Is(err, a2a.ErrTaskNotCancelable) {
				t.Fatalf("cancel of a completed task: %v", err)
			}
		})
	}
}

// A 1.0 client's cancel and resubscribe of a running task: the stream of
// SubscribeToTask ends with the canceled status CancelTask caused.
func TestClientV1CancelAndSubscribe(t *testing.T) {
	url := serveAgentd(t, &a2atest.Executor{Block: true})
	c := a2acall.NewV1(url, &http.Client{Timeout: a2atest.Wait}, a2acall.Options{NonBlocking: true})
	ctx := a2acall.CtxT(t)
	res, err := c.SendMessage(ctx, a2atest.Msg("wait"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State.Terminal() {
		t.Fatalf("a non-blocking send answered a finished task: %s", task.Status.State)
	}
	events := make(chan a2a.Event, 16)
	go func() {
		defer close(events)
		for ev, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: task.ID}) {
			if err != nil {
				return
			}
			events <- ev
		}
	}()
	<-events // the task, first
	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); err != nil {
		t.Fatal(err)
	}
	var last a2a.Event
	for ev := range events {
		last = ev
	}
	if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || !st.Status.State.Terminal() {
		t.Fatalf("the subscription's last event: %#v", last)
	}
}

// BenchmarkSendMessage is one blocking send to agentd's front over loopback
// keep-alive, by each JSON-RPC client: what the 1.0 shapes cost beside 0.3's.
func BenchmarkSendMessage(b *testing.B) {
	store := tasks.NewMemoryStore(1<<20, time.Hour)
	srv := httptest.NewServer(server.Handler(server.Config{Handler: tasks.NewEngine(store, &a2atest.Executor{}, nil), Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})}))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for _, c := range []struct {
		name string
		t    a2acall.Transport
	}{{"0.3", a2acall.New(srv.URL+"/", hc, a2acall.Options{})}, {"1.0", a2acall.NewV1(srv.URL+"/", hc, a2acall.Options{})}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := b.Context()
			for b.Loop() {
				if _, err := c.t.SendMessage(ctx, a2atest.Msg("hi")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
