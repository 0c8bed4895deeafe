package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/a2a/a2arest"
	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/tlsconfig"
)

// restReply is one answer of the HTTP+JSON binding.
type restReply struct {
	status int
	header http.Header
	body   []byte
}

// errorBody decodes the AIP-193 error body and returns its status and the
// first ErrorInfo's reason; it fails the test when the body is not one.
func (r restReply) errorBody(t *testing.T) (a2arest.Status, string) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error answer's Content-Type %q, want application/json: %s", ct, r.body)
	}
	var b struct {
		Error struct {
			Code    int    `json:"code"`
			Status  string `json:"status"`
			Message string `json:"message"`
			Details []struct {
				Type   string `json:"@type"`
				Reason string `json:"reason"`
				Domain string `json:"domain"`
			} `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("not an error body: %v: %s", err, r.body)
	}
	if b.Error.Code != r.status || b.Error.Status == "" || b.Error.Message == "" || len(b.Error.Details) == 0 {
		t.Fatalf("error body %s for HTTP %d", r.body, r.status)
	}
	info := b.Error.Details[0]
	if info.Type != "type.googleapis.com/google.rpc.ErrorInfo" || info.Reason == "" {
		t.Fatalf("details[0] is not an ErrorInfo: %s", r.body)
	}
	return a2arest.Status{Code: b.Error.Code, Status: b.Error.Status, Message: b.Error.Message}, info.Reason
}

// rest makes one request of the binding; body "" sends none.
func rest(t *testing.T, c *http.Client, method, url, body string, hdr map[string]string) restReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return restReply{status: resp.StatusCode, header: resp.Header, body: b}
}

// restServer is the real front and engine (push on, webhooks on loopback)
// behind a real socket.
func restServer(t *testing.T, cfg Config) (*httptest.Server, *tasks.Engine) {
	t.Helper()
	engine, _ := cfg.Handler.(*tasks.Engine)
	if cfg.Card == nil {
		cfg.Card = a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/", Push: true})
	}
	srv := httptest.NewServer(Handler(cfg))
	t.Cleanup(srv.Close)
	return srv, engine
}

// The routes of section 11.3 answer with the 1.0 shapes and the statuses
// of section 5.4; the errors carry the AIP-193 body.
func TestRESTRoutes(t *testing.T) {
	h := v1Handler(t, doneExec{}, 0)
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := srv.Client()

	r := rest(t, c, "POST", srv.URL+"/message:send", v1Send, nil)
	if r.status != 200 || r.header.Get("A2A-Version") != "1.0" || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("POST /message:send: %d %v %s", r.status, r.header, r.body)
	}
	var sent a2av1.SendMessageResponse
	if err := json.Unmarshal(r.body, &sent); err != nil || sent.Task == nil || sent.Task.Status.State != a2av1.StateCompleted {
		t.Fatalf("SendMessage answer %s: %v", r.body, err)
	}
	id := sent.Task.ID

	r = rest(t, c, "GET", srv.URL+"/tasks/"+id+"?historyLength=0", "", nil)
	var got a2av1.Task
	if r.status != 200 || json.Unmarshal(r.body, &got) != nil || got.ID != id || len(got.History) != 0 || len(got.Artifacts) != 1 {
		t.Fatalf("GET /tasks/{id}: %d %s", r.status, r.body)
	}
	r = rest(t, c, "GET", srv.URL+"/tasks?pageSize=5&status=completed&includeArtifacts=true&unknownParam=1", "", nil)
	var list a2av1.ListTasksResponse
	if r.status != 200 || json.Unmarshal(r.body, &list) != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != id || len(list.Tasks[0].Artifacts) != 1 {
		t.Fatalf("GET /tasks: %d %s", r.status, r.body)
	}
	r = rest(t, c, "GET", srv.URL+"/tasks?status=TASK_STATE_WORKING", "", nil)
	if json.Unmarshal(r.body, &list) != nil || len(list.Tasks) != 0 {
		t.Fatalf("GET /tasks?status=TASK_STATE_WORKING: %d %s", r.status, r.body)
	}

	// Push configs: create, get, list, delete.
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer hook.Close()
	r = rest(t, c, "POST", srv.URL+"/tasks/"+id+"/pushNotificationConfigs", `{"id":"cfg1","url":"`+hook.URL+`"}`, nil)
	var cfg a2av1.TaskPushNotificationConfig
	if r.status != 200 || json.Unmarshal(r.body, &cfg) != nil || cfg.ID != "cfg1" || cfg.TaskID != id {
		t.Fatalf("create push config: %d %s", r.status, r.body)
	}
	r = rest(t, c, "GET", srv.URL+"/tasks/"+id+"/pushNotificationConfigs/cfg1", "", nil)
	if r.status != 200 || json.Unmarshal(r.body, &cfg) != nil || cfg.URL != hook.URL {
		t.Fatalf("get push config: %d %s", r.status, r.body)
	}
	r = rest(t, c, "GET", srv.URL+"/tasks/"+id+"/pushNotificationConfigs", "", nil)
	var cfgs a2av1.ListTaskPushNotificationConfigsResponse
	if r.status != 200 || json.Unmarshal(r.body, &cfgs) != nil || len(cfgs.Configs) != 1 {
		t.Fatalf("list push configs: %d %s", r.status, r.body)
	}
	if r = rest(t, c, "DELETE", srv.URL+"/tasks/"+id+"/pushNotificationConfigs/cfg1", "", nil); r.status != 200 || string(r.body) != "{}" {
		t.Fatalf("delete push config: %d %s", r.status, r.body)
	}

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		reason                   string
	}{
		{"unknown task", "GET", "/tasks/nope", "", 404, "TASK_NOT_FOUND"},
		{"cancel a completed task", "POST", "/tasks/" + id + ":cancel", "", 409, "TASK_NOT_CANCELABLE"},
		{"subscribe to a completed task", "POST", "/tasks/" + id + ":subscribe", "", 400, "UNSUPPORTED_OPERATION"},
		{"subscribe to an unknown task", "GET", "/tasks/nope:subscribe", "", 404, "TASK_NOT_FOUND"},
		{"deleted push config", "GET", "/tasks/" + id + "/pushNotificationConfigs/cfg1", "", 404, "TASK_NOT_FOUND"},
		{"extended card", "GET", "/extendedAgentCard", "", 400, "UNSUPPORTED_OPERATION"},
	} {
		r := rest(t, c, tc.method, srv.URL+tc.path, tc.body, nil)
		if r.status != tc.status {
			t.Errorf("%s: HTTP %d, want %d: %s", tc.name, r.status, tc.status, r.body)
			continue
		}
		if _, reason := r.errorBody(t); reason != tc.reason {
			t.Errorf("%s: reason %s, want %s", tc.name, reason, tc.reason)
		}
	}
}

// Bad input gets a clear error in the spec's body and changes nothing.
func TestRESTBadInput(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	srv, _ := restServer(t, Config{Handler: engine, MaxMessage: 4 << 10})
	c := srv.Client()
	big := `{"message":{"messageId":"big","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("x", 2<<20) + `"}]}}`
	over := `{"message":{"messageId":"over","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("x", 8<<10) + `"}]}}`
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		reason                   string
	}{
		{"malformed JSON", "POST", "/message:send", `{"message":`, nil, 400, "INVALID_PARAMS"},
		{"body not an object", "POST", "/message:send", `[1]`, nil, 400, "INVALID_PARAMS"},
		{"no body", "POST", "/message:send", "", nil, 400, "INVALID_PARAMS"},
		{"no message id", "POST", "/message:send", `{"message":{"role":"ROLE_USER","parts":[{"text":"x"}]}}`, nil, 400, "INVALID_PARAMS"},
		{"a name twice", "POST", "/message:send", `{"message":{"messageId":"a","messageId":"b","role":"ROLE_USER","parts":[{"text":"x"}]}}`, nil, 400, "INVALID_PARAMS"},
		{"message over the limit", "POST", "/message:send", over, nil, 400, "INVALID_PARAMS"},
		{"body over the limit", "POST", "/message:send", big, nil, 413, "INVALID_REQUEST"},
		{"wrong content type", "POST", "/message:send", v1Send, map[string]string{"Content-Type": "text/plain"}, 415, "INVALID_REQUEST"},
		{"path and body disagree", "POST", "/tasks/a:cancel", `{"id":"b"}`, nil, 400, "INVALID_PARAMS"},
		{"bad int in the query", "GET", "/tasks?pageSize=ten", "", nil, 400, "INVALID_PARAMS"},
		{"a query parameter twice", "GET", "/tasks?pageSize=1&pageSize=2", "", nil, 400, "INVALID_PARAMS"},
		{"unknown state", "GET", "/tasks?status=sleeping", "", nil, 400, "INVALID_PARAMS"},
		{"a body on a GET", "GET", "/tasks/x", `{"id":"x"}`, nil, 400, "INVALID_PARAMS"},
		{"version 0.3", "POST", "/message:send", v1Send, map[string]string{"A2A-Version": "0.3"}, 400, "VERSION_NOT_SUPPORTED"},
		{"version 2.0", "POST", "/message:send", v1Send, map[string]string{"A2A-Version": "2.0"}, 400, "VERSION_NOT_SUPPORTED"},
		{"unknown route", "GET", "/tasks/a/b/c", "", nil, 404, "METHOD_NOT_FOUND"},
		{"unknown verb", "POST", "/tasks/a:pause", "", nil, 404, "METHOD_NOT_FOUND"},
		{"unknown path", "GET", "/nothing/here", "", nil, 404, "METHOD_NOT_FOUND"},
		{"tenant prefix", "POST", "/acme/message:send", v1Send, nil, 404, "METHOD_NOT_FOUND"},
		{"wrong method", "PUT", "/message:send", v1Send, nil, 405, "METHOD_NOT_FOUND"},
		{"DELETE a task", "DELETE", "/tasks/x", "", nil, 405, "METHOD_NOT_FOUND"},
	} {
		r := rest(t, c, tc.method, srv.URL+tc.path, tc.body, tc.hdr)
		if r.status != tc.status {
			t.Errorf("%s: HTTP %d, want %d: %.300s", tc.name, r.status, tc.status, r.body)
			continue
		}
		st, reason := r.errorBody(t)
		if reason != tc.reason {
			t.Errorf("%s: reason %s, want %s (%s)", tc.name, reason, tc.reason, st.Message)
		}
		if r.status == 405 && r.header.Get("Allow") == "" {
			t.Errorf("%s: 405 without Allow", tc.name)
		}
	}
	page, err := engine.ListTasks(ctxWithOperator(), tasks.ListQuery{})
	if err != nil || len(page.Tasks) != 0 {
		t.Fatalf("bad requests made tasks: %d %v", len(page.Tasks), err)
	}
}

// ctxWithOperator is a context whose caller is an operator, who sees every
// task.
func ctxWithOperator() context.Context {
	return WithIdentity(context.Background(), &Identity{ID: "op", Auth: AuthToken, Role: tlsconfig.RoleOperator}, http.Header{})
}

// sseData reads the data of each event of an SSE body, and the names of
// the events that had one.
func sseData(t *testing.T, body io.Reader) (data []string, names []string) {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, v)
			names = append(names, name)
			name = ""
		}
	}
	return data, names
}

// POST /message:stream answers an event stream of bare StreamResponses,
// the task first and its completion last; an error found before the stream
// starts is a plain error answer.
func TestRESTStream(t *testing.T) {
	h := v1Handler(t, doneExec{}, 0)
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/message:stream", strings.NewReader(v1Send))
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	data, _ := sseData(t, resp.Body)
	if len(data) < 2 {
		t.Fatalf("events: %q", data)
	}
	var first, last a2av1.StreamResponse
	if json.Unmarshal([]byte(data[0]), &first) != nil || first.Task == nil {
		t.Fatalf("first event %s, want the task", data[0])
	}
	if json.Unmarshal([]byte(data[len(data)-1]), &last) != nil || last.StatusUpdate == nil || last.StatusUpdate.Status.State != a2av1.StateCompleted {
		t.Fatalf("last event %s, want its completion", data[len(data)-1])
	}
	// Bad params before the stream: a plain 400, not an event.
	r := rest(t, srv.Client(), "POST", srv.URL+"/message:stream", `{"message":{}}`, nil)
	if r.status != 400 {
		t.Fatalf("bad stream params: %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	r.errorBody(t)
}

// Past the admission queue, a send and a stream over HTTP+JSON are shed as
// over JSON-RPC: 429 with Retry-After, RESOURCE_EXHAUSTED, no stream.
func TestRESTShed(t *testing.T) {
	ctrl, err := admit.New(admit.Config{Bounds: admit.Bounds{MaxRuns: 1, MaxLive: 1}, RunEstimate: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), waitExec{}, nil, tasks.WithAdmission(ctrl, admit.Policy{}))
	srv, _ := restServer(t, Config{Handler: engine})
	c := srv.Client()
	msg := func(id string) string {
		return `{"configuration":{"returnImmediately":true},"message":{"messageId":"` + id + `","role":"ROLE_USER","parts":[{"text":"wait"}]}}`
	}
	r := rest(t, c, "POST", srv.URL+"/message:send", msg("m1"), nil)
	var sent a2av1.SendMessageResponse
	if r.status != 200 || json.Unmarshal(r.body, &sent) != nil || sent.Task == nil {
		t.Fatalf("first send: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/message:send", "/message:stream"} {
		r := rest(t, c, "POST", srv.URL+path, msg("m-"+path), nil)
		if r.status != 429 {
			t.Fatalf("%s past capacity: HTTP %d %s", path, r.status, r.body)
		}
		if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n <= 0 {
			t.Errorf("%s: Retry-After %q", path, r.header.Get("Retry-After"))
		}
		st, reason := r.errorBody(t)
		if st.Status != "RESOURCE_EXHAUSTED" || reason != "RESOURCE_EXHAUSTED" {
			t.Errorf("%s: status %s reason %s", path, st.Status, reason)
		}
	}
	if r := rest(t, c, "POST", srv.URL+"/tasks/"+sent.Task.ID+":cancel", "", nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	waitIdle(t, engine)
}

// waitIdle waits for the engine's runs to return.
func waitIdle(t *testing.T, engine *tasks.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := engine.Wait(ctx); err != nil {
		t.Fatalf("runs did not return: %v", err)
	}
}

// A stream whose client goes away mid-way ends on the server: the
// subscription is dropped and no goroutine is left (TestMain's goleak).
func TestRESTStreamAbandoned(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), waitExec{}, nil)
	srv, _ := restServer(t, Config{Handler: engine, SSEKeepAlive: 5 * time.Millisecond})
	c := srv.Client()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/message:stream", strings.NewReader(`{"message":{"messageId":"w1","role":"ROLE_USER","parts":[{"text":"wait"}]}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	var taskID string
	for taskID == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			var ev a2av1.StreamResponse
			if json.Unmarshal([]byte(d), &ev) == nil && ev.Task != nil {
				taskID = ev.Task.ID
			}
		}
	}
	cancel() // the client goes away mid-stream
	resp.Body.Close()
	// Subscribe and abandon too, then end the task.
	ctx2, cancel2 := context.WithCancel(context.Background())
	req, _ = http.NewRequestWithContext(ctx2, "GET", srv.URL+"/tasks/"+taskID+":subscribe", nil)
	resp, err = c.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("subscribe: %v %v", resp, err)
	}
	cancel2()
	resp.Body.Close()
	if r := rest(t, c, "POST", srv.URL+"/tasks/"+taskID+":cancel", "", nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	waitIdle(t, engine)
	srv.CloseClientConnections()
}

// The binding's client against the real server: every Transport method and
// the push config methods, with a2a-go's types and sentinels.
func TestRESTClient(t *testing.T) {
	h := v1Handler(t, doneExec{}, 0)
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()
	cl := a2arest.New(srv.URL+"/", srv.Client(), a2acall.Options{})
	msg := func(id string) *a2a.MessageSendParams {
		return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})}
	}
	res, err := cl.SendMessage(ctx, msg("c1"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 {
		t.Fatalf("SendMessage: %#v", res)
	}
	got, err := cl.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.ID != task.ID || got.Artifacts[0].Parts[0].(a2a.TextPart).Text == "" {
		t.Fatalf("GetTask: %+v %v", got, err)
	}
	if _, err := cl.GetTask(ctx, &a2a.TaskQueryParams{ID: "nope"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("GetTask of an unknown task: %v, want ErrTaskNotFound", err)
	}
	if _, err := cl.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Fatalf("CancelTask of a completed task: %v", err)
	}
	var events []a2a.Event
	for ev, err := range cl.SendStreamingMessage(ctx, msg("c2")) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	if len(events) < 2 {
		t.Fatalf("stream: %d events", len(events))
	}
	if _, ok := events[0].(*a2a.Task); !ok {
		t.Fatalf("first event %T", events[0])
	}
	if u, ok := events[len(events)-1].(*a2a.TaskStatusUpdateEvent); !ok || u.Status.State != a2a.TaskStateCompleted || !u.Final {
		t.Fatalf("last event %#v", events[len(events)-1])
	}
	for _, err := range cl.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: task.ID}) {
		if !errors.Is(err, a2a.ErrUnsupportedOperation) {
			t.Fatalf("resubscribe to a completed task: %v", err)
		}
	}
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer hook.Close()
	set, err := cl.SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: task.ID, Config: a2a.PushConfig{ID: "p1", URL: hook.URL, Token: "tok"}})
	if err != nil || set.Config.ID != "p1" || set.TaskID != task.ID {
		t.Fatalf("SetTaskPushConfig: %+v %v", set, err)
	}
	if g, err := cl.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: task.ID, ConfigID: "p1"}); err != nil || g.Config.URL != hook.URL || g.Config.Token != "tok" {
		t.Fatalf("GetTaskPushConfig: %+v %v", g, err)
	}
	if l, err := cl.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID}); err != nil || len(l) != 1 {
		t.Fatalf("ListTaskPushConfig: %+v %v", l, err)
	}
	if err := cl.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: task.ID, ConfigID: "p1"}); err != nil {
		t.Fatal(err)
	}
	if l, err := cl.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: task.ID}); err != nil || len(l) != 0 {
		t.Fatalf("ListTaskPushConfig after delete: %+v %v", l, err)
	}
}

// The client cancels a working task and resubscribes to it.
func TestRESTClientCancelAndResubscribe(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), waitExec{}, nil)
	srv, _ := restServer(t, Config{Handler: engine})
	ctx := context.Background()
	cl := a2arest.New(srv.URL, srv.Client(), a2acall.Options{NonBlocking: true})
	res, err := cl.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "wait"})})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State.Terminal() {
		t.Fatalf("non-blocking send answered %s", task.Status.State)
	}
	sub, cancelSub := context.WithCancel(ctx)
	defer cancelSub()
	seen := make(chan a2a.TaskState, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range cl.ResubscribeToTask(sub, &a2a.TaskIDParams{ID: task.ID}) {
			if err != nil {
				return
			}
			switch v := ev.(type) {
			case *a2a.Task:
				seen <- v.Status.State
			case *a2a.TaskStatusUpdateEvent:
				seen <- v.Status.State
			}
		}
	}()
	if s := <-seen; s.Terminal() {
		t.Fatalf("subscription's first state %s", s)
	}
	got, err := cl.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %+v %v", got, err)
	}
	ok := testkit.Poll(5*time.Second, func() bool {
		select {
		case s := <-seen:
			return s == a2a.TaskStateCanceled
		default:
			return false
		}
	})
	if !ok {
		t.Fatal("the subscription did not see the cancel")
	}
	<-done
	waitIdle(t, engine)
}

// The binding is behind the same authentication as JSON-RPC: no
// credentials is 401 on every route (an unknown one included), and an mTLS
// SPIFFE identity or a bearer token lands on the task as its caller, which
// a caller cannot spoof through metadata.
func TestRESTAuth(t *testing.T) {
	f := newAuthFixture(t)
	base := strings.TrimSuffix(f.url, "/")
	anon := f.client(nil)
	for _, rt := range []struct{ method, path, body string }{
		{"POST", "/message:send", v1Send},
		{"POST", "/message:stream", v1Send},
		{"GET", "/tasks", ""},
		{"GET", "/tasks/x", ""},
		{"GET", "/tasks/x/y/z", ""},
	} {
		r := rest(t, anon, rt.method, base+rt.path, rt.body, nil)
		if r.status != 401 || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s %s without credentials: HTTP %d %s", rt.method, rt.path, r.status, r.body)
		}
	}
	if r := rest(t, anon, "POST", base+"/message:send", v1Send, bearerHdr("not-a-token-0123456789")); r.status != 401 {
		t.Errorf("unknown token: HTTP %d", r.status)
	}
	spoof := `{"metadata":{"agentd/caller":"spiffe://example.org/operator"},"message":{"messageId":"MID","role":"ROLE_USER","parts":[{"text":"hello"}],"metadata":{"agentd/caller_auth":"mtls"}}}`
	for _, c := range []struct {
		name         string
		client       *http.Client
		hdr          map[string]string
		caller, auth string
	}{
		{"mTLS peer", f.client(f.svid(t, peerID, tlsconfig.SVIDOptions{})), nil, peerID.String(), AuthMTLS},
		{"static peer token", anon, bearerHdr(peerToken), "token:ci", AuthToken},
	} {
		r := rest(t, c.client, "POST", base+"/message:send", strings.Replace(spoof, "MID", c.name, 1), c.hdr)
		var sent a2av1.SendMessageResponse
		if r.status != 200 || json.Unmarshal(r.body, &sent) != nil || sent.Task == nil {
			t.Fatalf("%s: HTTP %d %s", c.name, r.status, r.body)
		}
		if got := sent.Task.Metadata["agentd/caller"]; got != c.caller {
			t.Errorf("%s: task caller %v, want %s", c.name, got, c.caller)
		}
		if got := sent.Task.Metadata["agentd/caller_auth"]; got != c.auth {
			t.Errorf("%s: task caller_auth %v, want %s", c.name, got, c.auth)
		}
	}
}

// A task is answered over HTTP+JSON only to its creator and operators, as
// over JSON-RPC: anyone else gets the answer for a task that does not exist.
func TestRESTAuthz(t *testing.T) {
	f := newAuthzFixture(t, nil)
	id := f.create(aliceToken)
	c := http.DefaultClient
	for _, rt := range []struct{ method, path string }{
		{"GET", "/tasks/" + id},
		{"POST", "/tasks/" + id + ":cancel"},
		{"GET", "/tasks/" + id + ":subscribe"},
		{"GET", "/tasks/" + id + "/pushNotificationConfigs"},
	} {
		r := rest(t, c, rt.method, f.url+rt.path, "", bearerHdr(bobToken))
		if r.status != 404 {
			t.Errorf("bob %s %s: HTTP %d %s", rt.method, rt.path, r.status, r.body)
			continue
		}
		if _, reason := r.errorBody(t); reason != "TASK_NOT_FOUND" {
			t.Errorf("bob %s %s: reason %s", rt.method, rt.path, reason)
		}
	}
	var list a2av1.ListTasksResponse
	if r := rest(t, c, "GET", f.url+"/tasks", "", bearerHdr(bobToken)); r.status != 200 || json.Unmarshal(r.body, &list) != nil || len(list.Tasks) != 0 {
		t.Errorf("bob lists: HTTP %d %s", r.status, r.body)
	}
	for _, tok := range []string{aliceToken, oncallToken} {
		if r := rest(t, c, "GET", f.url+"/tasks/"+id, "", bearerHdr(tok)); r.status != 200 {
			t.Errorf("GET as %s: HTTP %d %s", tok, r.status, r.body)
		}
	}
}

// The client over mTLS with a SPIFFE identity and over a bearer token (the
// header added through Options.Header): the server records each as the
// caller; without credentials the client's error is the 401.
func TestRESTClientIdentity(t *testing.T) {
	f := newAuthFixture(t)
	ctx := context.Background()
	send := func(cl *a2arest.Client) (*a2a.Task, error) {
		res, err := cl.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hello"})})
		if err != nil {
			return nil, err
		}
		return res.(*a2a.Task), nil
	}
	mtls := a2arest.New(f.url, f.client(f.svid(t, peerID, tlsconfig.SVIDOptions{})), a2acall.Options{})
	task, err := send(mtls)
	if err != nil || task.Metadata["agentd/caller"] != peerID.String() || task.Metadata["agentd/caller_auth"] != AuthMTLS {
		t.Fatalf("mTLS: %+v %v", task, err)
	}
	bearer := a2arest.New(f.url, f.client(nil), a2acall.Options{Header: func(_ context.Context, h http.Header) { h.Set("Authorization", "Bearer "+peerToken) }})
	if task, err = send(bearer); err != nil || task.Metadata["agentd/caller"] != "token:ci" {
		t.Fatalf("bearer: %+v %v", task, err)
	}
	var re *a2arest.Error
	if _, err := send(a2arest.New(f.url, f.client(nil), a2acall.Options{})); !errors.As(err, &re) || re.HTTPStatus != 401 {
		t.Fatalf("no credentials: %v", err)
	}
}
