package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
)

// holdExec keeps every task working until it is cancelled or release closes
// (the fixture closes it at cleanup, so that no run outlives its test).
type holdExec struct{ release <-chan struct{} }

func (h holdExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-h.release:
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(context.WithoutCancel(ctx), ev)
}

func (holdExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// ownerBlobs holds one blob per id, each stored by a task.
type ownerBlobs map[string][2]string // id -> {content, task}

func (b ownerBlobs) ReadBlob(id string) ([]byte, string, string, bool) {
	v, ok := b[id]
	return []byte(v[0]), "text/plain", v[1], ok
}

const (
	aliceToken  = "alice-token-0123456789"
	bobToken    = "bob-token-0123456789"
	oncallToken = "oncall-token-0123456789"
)

// authzFixture is the real handler and engine behind a real socket, with
// static bearer tokens for two peers (alice and bob) and an operator
// (oncall).
type authzFixture struct {
	t      *testing.T
	url    string
	engine *tasks.Engine
}

func newAuthzFixture(t *testing.T, blobs BlobSource) *authzFixture {
	t.Helper()
	tokens, err := ParseTokens([]byte(aliceToken + " peer alice\n" + bobToken + " peer bob\n" + oncallToken + " operator oncall\n"))
	if err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(hook.Close)
	store := tasks.NewMemoryStore(100, time.Hour)
	pusher := tasks.NewPusher(tasks.PushSettings{Policy: tasks.PushPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}, store.ListPush)
	t.Cleanup(pusher.Close)
	release := make(chan struct{})
	engine := tasks.NewEngine(store, holdExec{release: release}, nil, tasks.WithPusher(pusher))
	t.Cleanup(func() {
		close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := engine.Wait(ctx); err != nil {
			t.Errorf("the held tasks' runs did not return: %v", err)
		}
	})
	srv := httptest.NewServer(Handler(Config{
		Handler: engine,
		Card:    a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"}),
		Auth:    &Auth{Tokens: tokens},
		Blobs:   blobs,
	}))
	t.Cleanup(srv.Close)
	return &authzFixture{t: t, url: srv.URL, engine: engine}
}

type authzReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call makes one JSON-RPC call as token (A2A-Version version, "" for 0.3).
// For a streaming method it returns the first event.
func (f *authzFixture) call(token, version, method string, params any) authzReply {
	f.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, f.url+"/", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		f.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		f.t.Fatalf("%s: status %d %s", method, resp.StatusCode, body)
	}
	var raw []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				raw = []byte(d)
				break
			}
		}
	} else {
		raw, _ = io.ReadAll(resp.Body)
	}
	var r authzReply
	if err := json.Unmarshal(raw, &r); err != nil {
		f.t.Fatalf("%s: not a JSON-RPC reply: %q", method, raw)
	}
	return r
}

// create sends a non-blocking message as token and returns the task's id.
func (f *authzFixture) create(token string) string {
	f.t.Helper()
	r := f.call(token, "", "message/send", map[string]any{
		"message":       map[string]any{"messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "user", "parts": []any{map[string]any{"kind": "text", "text": "work"}}},
		"configuration": map[string]any{"blocking": false},
	})
	var task struct {
		ID string `json:"id"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &task) != nil || task.ID == "" {
		f.t.Fatalf("message/send: %+v %s", r.Error, r.Result)
	}
	return task.ID
}

// Every method on one task, in both protocol versions, answers only the
// task's creator (for a nested task: its root's creator) and operators;
// anyone else gets exactly the answer for a task that does not exist.
func TestTaskMethodsAnswerOnlyTheCreatorAndOperators(t *testing.T) {
	f := newAuthzFixture(t, nil)
	root := f.create(aliceToken)
	nested := "nested-of-" + root
	if err := f.engine.OpenTask(context.Background(), &a2a.Task{ID: a2a.TaskID(nested), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, a2a.TaskID(root)); err != nil {
		t.Fatal(err)
	}
	hook := "http://127.0.0.1:9/hook"
	// Alice registers a webhook on each, so the config reads have something
	// to find.
	for _, id := range []string{root, nested} {
		if r := f.call(aliceToken, "", "tasks/pushNotificationConfig/set", map[string]any{"taskId": id, "pushNotificationConfig": map[string]any{"id": "cfg", "url": hook}}); r.Error != nil {
			t.Fatalf("alice sets a webhook on %s: %+v", id, r.Error)
		}
	}
	const unknown = "no-such-task"
	methods := []struct {
		version, method string
		params          func(id string) any
	}{
		{"", "tasks/get", func(id string) any { return map[string]any{"id": id} }},
		{"", "tasks/resubscribe", func(id string) any { return map[string]any{"id": id} }},
		{"", "tasks/pushNotificationConfig/get", func(id string) any { return map[string]any{"id": id, "pushNotificationConfigId": "cfg"} }},
		{"", "tasks/pushNotificationConfig/list", func(id string) any { return map[string]any{"id": id} }},
		{"", "tasks/pushNotificationConfig/set", func(id string) any {
			return map[string]any{"taskId": id, "pushNotificationConfig": map[string]any{"id": "cfg2", "url": hook}}
		}},
		{"", "tasks/pushNotificationConfig/delete", func(id string) any { return map[string]any{"id": id, "pushNotificationConfigId": "cfg2"} }},
		{"", "message/send", func(id string) any {
			return map[string]any{"message": map[string]any{"messageId": "f-" + id, "taskId": id, "role": "user", "parts": []any{map[string]any{"kind": "text", "text": "more"}}},
				"configuration": map[string]any{"blocking": false}}
		}},
		{"1.0", "GetTask", func(id string) any { return map[string]any{"id": id} }},
		{"1.0", "SubscribeToTask", func(id string) any { return map[string]any{"id": id} }},
		{"1.0", "GetTaskPushNotificationConfig", func(id string) any { return map[string]any{"taskId": id, "id": "cfg"} }},
		{"1.0", "ListTaskPushNotificationConfigs", func(id string) any { return map[string]any{"taskId": id} }},
		{"1.0", "CreateTaskPushNotificationConfig", func(id string) any { return map[string]any{"taskId": id, "id": "cfg3", "url": hook} }},
		{"1.0", "DeleteTaskPushNotificationConfig", func(id string) any { return map[string]any{"taskId": id, "id": "cfg3"} }},
		{"1.0", "SendMessage", func(id string) any {
			return map[string]any{"message": map[string]any{"messageId": "g-" + id, "taskId": id, "role": "ROLE_USER", "parts": []any{map[string]any{"text": "more"}}},
				"configuration": map[string]any{"returnImmediately": true}}
		}},
	}
	// The answer for an unknown task, with the id taken out.
	notFound := func(version, method string, params any, id string) string {
		r := f.call(bobToken, version, method, params)
		if r.Error == nil {
			return "success: " + string(r.Result)
		}
		return fmt.Sprintf("%d %s", r.Error.Code, strings.ReplaceAll(r.Error.Message, id, "ID"))
	}
	for _, id := range []string{root, nested} {
		for _, m := range methods {
			if m.method == "message/send" || m.method == "SendMessage" {
				if id == nested {
					continue // a nested task takes no messages from anyone
				}
			}
			want := notFound(m.version, m.method, m.params(unknown), unknown)
			if !strings.HasPrefix(want, "-32001 ") {
				t.Fatalf("%s on an unknown task: %s; want -32001 (task not found)", m.method, want)
			}
			if got := notFound(m.version, m.method, m.params(id), id); got != want {
				t.Errorf("bob's %s on alice's task %s: %q; want the unknown-task answer %q", m.method, id, got, want)
			}
			for _, who := range []string{aliceToken, oncallToken} {
				if r := f.call(who, m.version, m.method, m.params(id)); r.Error != nil {
					t.Errorf("%s on %s as %s: %+v", m.method, id, who[:5], r.Error)
				}
			}
		}
	}
	// Cancel last: bob cannot, in either version; alice can in 0.3 and an
	// operator in 1.0.
	for _, c := range []struct {
		version, method string
	}{{"", "tasks/cancel"}, {"1.0", "CancelTask"}} {
		for _, id := range []string{root, nested} {
			if got, want := notFound(c.version, c.method, map[string]any{"id": id}, id), notFound(c.version, c.method, map[string]any{"id": unknown}, unknown); got != want {
				t.Errorf("bob's %s on %s: %q; want %q", c.method, id, got, want)
			}
		}
	}
	if r := f.call(aliceToken, "", "tasks/cancel", map[string]any{"id": root}); r.Error != nil || !strings.Contains(string(r.Result), `"canceled"`) {
		t.Fatalf("alice cancels her task: %+v %s", r.Error, r.Result)
	}
	if r := f.call(oncallToken, "1.0", "CancelTask", map[string]any{"id": nested}); r.Error != nil || !strings.Contains(string(r.Result), "TASK_STATE_CANCELED") {
		t.Fatalf("an operator cancels alice's nested task: %+v %s", r.Error, r.Result)
	}
	// Listing stays scoped to the caller.
	var page struct {
		TotalSize int `json:"totalSize"`
	}
	if r := f.call(bobToken, "1.0", "ListTasks", map[string]any{}); r.Error != nil || json.Unmarshal(r.Result, &page) != nil || page.TotalSize != 0 {
		t.Fatalf("bob lists %d tasks (%+v)", page.TotalSize, r.Error)
	}
}

// A stored distillate is read only by whoever may read the task that stored
// it; anyone else, like a request for an unknown blob, gets 404.
func TestBlobReadsFollowTheTask(t *testing.T) {
	blobs := ownerBlobs{}
	f := newAuthzFixture(t, blobs)
	root := f.create(aliceToken)
	blobs["0192-alice"] = [2]string{"alice's result", root}
	blobs["0192-orphan"] = [2]string{"a task gone", "evicted-task"}
	get := func(token, id string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, f.url+"/blobs/"+id, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		token, id string
		status    int
	}{
		{aliceToken, "0192-alice", 200},
		{oncallToken, "0192-alice", 200},
		{bobToken, "0192-alice", 404},
		{bobToken, "0192-unknown", 404},
		{aliceToken, "0192-orphan", 404},
		{"", "0192-alice", 401},
	} {
		code, body := get(c.token, c.id)
		if code != c.status || (code == 200 && body != "alice's result") {
			t.Errorf("GET /blobs/%s as %q: %d %q; want %d", c.id, c.token, code, body, c.status)
		}
	}
	_, unknownBody := get(bobToken, "0192-unknown")
	if _, body := get(bobToken, "0192-alice"); body != unknownBody {
		t.Errorf("bob's 404 for alice's blob %q differs from the unknown blob's %q", body, unknownBody)
	}
}
