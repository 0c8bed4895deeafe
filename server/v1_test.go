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
	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/a2a/tasks"
)

// v1Handler is the front over an engine with push notifications on (webhooks
// on loopback allowed) and exec as its executor.
func v1Handler(t *testing.T, exec a2asrv.AgentExecutor, keepAlive time.Duration) http.Handler {
	t.Helper()
	return Handler(v1Config(t, exec, keepAlive))
}

// v1Config is v1Handler's configuration.
func v1Config(t *testing.T, exec a2asrv.AgentExecutor, keepAlive time.Duration) Config {
	t.Helper()
	store := tasks.NewMemoryStore(100, time.Hour)
	pusher := tasks.NewPusher(tasks.PushSettings{Policy: tasks.PushPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}, store.ListPush)
	t.Cleanup(pusher.Close)
	engine := tasks.NewEngine(store, exec, nil, tasks.WithPusher(pusher))
	return Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/", Push: true, Instance: "i1"}), SSEKeepAlive: keepAlive}
}

// call posts one JSON-RPC request with an optional A2A-Version header and
// returns the response and its first (or only) JSON-RPC object.
func call(t *testing.T, h http.Handler, version, method, params string) (*http.Response, rpcReply) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `"`
	if params != "" {
		body += `,"params":` + params
	}
	body += "}"
	rec := httptest.NewRecorder()
	req := newPost(strings.NewReader(body))
	if version != "" {
		req.Header.Set(VersionHeader, version)
	}
	h.ServeHTTP(rec, req)
	resp := rec.Result()
	var r rpcReply
	text := rec.Body.String()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		for _, line := range strings.Split(text, "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				text = data
				break
			}
		}
	}
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("%s: reply is not JSON-RPC: %v\n%s", method, err, rec.Body.String())
	}
	return resp, r
}

func errorReason(t *testing.T, e *RPCError) string {
	t.Helper()
	list, ok := e.Data.([]any)
	if !ok || len(list) == 0 {
		t.Fatalf("1.0 error data is not an ErrorInfo array: %#v", e.Data)
	}
	info := list[0].(map[string]any)
	if info["@type"] != "type.googleapis.com/google.rpc.ErrorInfo" || info["domain"] != a2av1.ErrorDomain {
		t.Fatalf("ErrorInfo: %v", info)
	}
	return info["reason"].(string)
}

const v1Send = `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`

func TestV1SendGetListCancel(t *testing.T) {
	h := v1Handler(t, doneExec{}, 0)
	resp, r := call(t, h, "1.0", a2av1.MethodSendMessage, v1Send)
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	if resp.Header.Get(VersionHeader) != "1.0" {
		t.Fatalf("A2A-Version answer header %q", resp.Header.Get(VersionHeader))
	}
	var sent a2av1.SendMessageResponse
	if err := json.Unmarshal(r.Result, &sent); err != nil || sent.Task == nil {
		t.Fatalf("SendMessage result %s: %v", r.Result, err)
	}
	task := sent.Task
	if task.Status.State != a2av1.StateCompleted || task.Artifacts[0].Parts[0].Text == nil || task.History[0].Role != a2av1.RoleUser {
		t.Fatalf("task %s", r.Result)
	}
	if _, err := time.Parse(time.RFC3339, task.Status.Timestamp); err != nil || !strings.HasSuffix(task.Status.Timestamp, "Z") {
		t.Fatalf("timestamp %q", task.Status.Timestamp)
	}

	// The same task through 0.3.
	_, r03 := call(t, h, "", MethodGet, `{"id":"`+task.ID+`"}`)
	var t03 a2a.Task
	if err := json.Unmarshal(r03.Result, &t03); err != nil || t03.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("0.3 view: %s", r03.Result)
	}

	_, r = call(t, h, "1.0", a2av1.MethodGetTask, `{"id":"`+task.ID+`","historyLength":0}`)
	var got a2av1.Task
	json.Unmarshal(r.Result, &got)
	if got.ID != task.ID || len(got.History) != 0 {
		t.Fatalf("GetTask: %s", r.Result)
	}

	for i := 0; i < 2; i++ {
		// New messages (the same messageId again would be the first task).
		call(t, h, "1.0", a2av1.MethodSendMessage, strings.Replace(v1Send, `"m1"`, fmt.Sprintf(`"m1-%d"`, i), 1))
	}
	_, r = call(t, h, "1.0", a2av1.MethodListTasks, `{"pageSize":2}`)
	var page a2av1.ListTasksResponse
	if err := json.Unmarshal(r.Result, &page); err != nil || len(page.Tasks) != 2 || page.TotalSize != 3 || page.NextPageToken == "" {
		t.Fatalf("ListTasks page 1: %s", r.Result)
	}
	if page.Tasks[0].Artifacts != nil {
		t.Fatal("artifacts listed without includeArtifacts")
	}
	_, r = call(t, h, "1.0", a2av1.MethodListTasks, `{"pageSize":2,"includeArtifacts":true,"pageToken":"`+page.NextPageToken+`"}`)
	var page2 a2av1.ListTasksResponse
	json.Unmarshal(r.Result, &page2)
	if len(page2.Tasks) != 1 || page2.NextPageToken != "" || len(page2.Tasks[0].Artifacts) != 1 {
		t.Fatalf("ListTasks page 2: %s", r.Result)
	}
	if !strings.Contains(string(r.Result), `"nextPageToken":""`) {
		t.Fatalf("the last page has no empty nextPageToken: %s", r.Result)
	}
	if len(page2.Tasks[0].History) != 1 {
		t.Fatalf("ListTasks without historyLength: %s", r.Result)
	}
	_, r = call(t, h, "1.0", a2av1.MethodListTasks, `{"historyLength":0}`)
	var trimmed a2av1.ListTasksResponse
	if json.Unmarshal(r.Result, &trimmed); len(trimmed.Tasks) != 3 || trimmed.Tasks[0].History != nil {
		t.Fatalf("ListTasks with historyLength 0: %s", r.Result)
	}
	if _, r = call(t, h, "1.0", a2av1.MethodListTasks, `{"historyLength":-1}`); r.Error == nil || r.Error.Code != CodeInvalidParams {
		t.Fatalf("ListTasks with a negative historyLength: %+v", r.Error)
	}
	_, r = call(t, h, "1.0", a2av1.MethodListTasks, `{"status":"TASK_STATE_WORKING"}`)
	json.Unmarshal(r.Result, &page)
	if len(page.Tasks) != 0 {
		t.Fatalf("status filter: %s", r.Result)
	}

	_, r = call(t, h, "1.0", a2av1.MethodCancelTask, `{"id":"`+task.ID+`"}`)
	if r.Error == nil || r.Error.Code != CodeTaskNotCancel || errorReason(t, r.Error) != "TASK_NOT_CANCELABLE" {
		t.Fatalf("cancel of a finished task: %+v", r.Error)
	}
	_, r = call(t, h, "1.0", a2av1.MethodGetTask, `{"id":"nope"}`)
	if r.Error == nil || r.Error.Code != CodeTaskNotFound || errorReason(t, r.Error) != "TASK_NOT_FOUND" {
		t.Fatalf("unknown task: %+v", r.Error)
	}
}

func TestV1VersionNegotiation(t *testing.T) {
	h := v1Handler(t, doneExec{}, 0)
	for _, tc := range []struct {
		version, method string
		code            int
	}{
		{"2.0", a2av1.MethodSendMessage, CodeVersionNotSupported},
		{"0.2", MethodSend, CodeVersionNotSupported},
		{"banana", MethodGet, CodeVersionNotSupported},
		{"1.0", MethodSend, CodeMethodNotFound},
		{"0.3", a2av1.MethodSendMessage, CodeMethodNotFound},
	} {
		params := v1Send
		if !a2av1.IsMethod(tc.method) {
			params = `{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}`
		}
		_, r := call(t, h, tc.version, tc.method, params)
		if r.Error == nil || r.Error.Code != tc.code {
			t.Errorf("A2A-Version %s, %s: %+v, want %d", tc.version, tc.method, r.Error, tc.code)
		}
	}
	for _, v := range []string{"1.0", "1.0.2", "1", ""} {
		if _, r := call(t, h, v, a2av1.MethodSendMessage, v1Send); r.Error != nil {
			t.Errorf("A2A-Version %q: %+v", v, r.Error)
		}
	}
	for _, v := range []string{"0.3", "0.3.0", ""} {
		if _, r := call(t, h, v, MethodGet, `{"id":"x"}`); r.Error == nil || r.Error.Code != CodeTaskNotFound {
			t.Errorf("A2A-Version %q on 0.3: %+v", v, r.Error)
		}
	}
}

// sseEvents posts a streaming request and returns its data lines.
func sseEvents(t *testing.T, h http.Handler, method, params string) ([]string, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":"s","method":"`+method+`","params":`+params+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(VersionHeader, "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	b, _ := io.ReadAll(resp.Body)
	var data []string
	for _, line := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = append(data, d)
		}
	}
	return data, string(b)
}

func TestV1StreamShapes(t *testing.T) {
	h := v1Handler(t, doneExec{}, 0)
	events, raw := sseEvents(t, h, a2av1.MethodSendStreamingMessage, v1Send)
	want := []string{`"result":{"task":`, `"result":{"statusUpdate":`, `"result":{"artifactUpdate":`, `"result":{"statusUpdate":`}
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(events), len(want), raw)
	}
	for i, w := range want {
		if !strings.Contains(events[i], w) {
			t.Errorf("event %d lacks %s: %s", i, w, events[i])
		}
	}
	if !strings.Contains(events[3], `"state":"TASK_STATE_COMPLETED"`) {
		t.Errorf("last event: %s", events[3])
	}
	var first struct {
		Result a2av1.StreamResponse `json:"result"`
	}
	json.Unmarshal([]byte(events[0]), &first)
	// Subscribing to a finished task is an UnsupportedOperation in 1.0,
	// answered as plain JSON (no stream starts).
	resp, r := call(t, h, "1.0", a2av1.MethodSubscribeToTask, `{"id":"`+first.Result.Task.ID+`"}`)
	if resp.Header.Get("Content-Type") != "application/json" || r.Error == nil || r.Error.Code != CodeUnsupportedOp || errorReason(t, r.Error) != "UNSUPPORTED_OPERATION" {
		t.Fatalf("subscribe to a finished task: %+v", r)
	}
}

// slowExec works until its context ends.
type slowExec struct{}

func (slowExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil))
	<-ctx.Done()
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(context.WithoutCancel(ctx), ev)
}

func (slowExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return nil
}

// A subscription to a running task gets the task, keep-alive comments while
// it idles, and the cancellation as its last event.
func TestV1SubscribeAndCancelARunningTask(t *testing.T) {
	h := v1Handler(t, slowExec{}, 10*time.Millisecond)
	_, r := call(t, h, "1.0", a2av1.MethodSendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"returnImmediately":true}}`)
	var sent a2av1.SendMessageResponse
	json.Unmarshal(r.Result, &sent)
	if sent.Task == nil || a2av1.StateTo(sent.Task.Status.State).Terminal() {
		t.Fatalf("returnImmediately: %s", r.Result)
	}
	id := sent.Task.ID

	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":"s","method":"SubscribeToTask","params":{"id":"`+id+`"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(VersionHeader, "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	next := func(want string) string {
		t.Helper()
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), want) {
				return lines.Text()
			}
		}
		t.Fatalf("the stream ended before a line starting %q: %v", want, lines.Err())
		return ""
	}
	if first := next("data: "); !strings.Contains(first, `"task":`) {
		t.Fatalf("first event: %s", first)
	}
	next(": keep-alive") // the task idles: the stream is kept alive
	if _, r := call(t, h, "1.0", a2av1.MethodCancelTask, `{"id":"`+id+`"}`); r.Error != nil {
		t.Fatalf("cancel: %+v", r.Error)
	}
	var last string
	for lines.Scan() {
		if d, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
			last = d
		}
	}
	if !strings.Contains(last, "TASK_STATE_CANCELED") {
		t.Fatalf("last event %s, want the cancellation", last)
	}
}

func TestV1PushConfigMethods(t *testing.T) {
	h := v1Handler(t, slowExec{}, 0)
	_, r := call(t, h, "1.0", a2av1.MethodSendMessage, `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"returnImmediately":true}}`)
	var sent a2av1.SendMessageResponse
	json.Unmarshal(r.Result, &sent)
	id := sent.Task.ID
	defer call(t, h, "1.0", a2av1.MethodCancelTask, `{"id":"`+id+`"}`)

	_, r = call(t, h, "1.0", a2av1.MethodCreatePushConfig, `{"taskId":"`+id+`","url":"http://10.0.0.1/hook"}`)
	if r.Error == nil || r.Error.Code != CodeInvalidParams || !strings.Contains(r.Error.detail()+jsonString(r.Error.Data), "private") {
		t.Fatalf("private webhook: %+v", r.Error)
	}
	_, r = call(t, h, "1.0", a2av1.MethodCreatePushConfig, `{"taskId":"`+id+`","url":"http://127.0.0.1:9/hook","token":"t","authentication":{"scheme":"Bearer","credentials":"c"}}`)
	var created a2av1.TaskPushNotificationConfig
	if err := json.Unmarshal(r.Result, &created); err != nil || created.ID == "" || created.TaskID != id || created.Authentication.Scheme != "Bearer" {
		t.Fatalf("create: %s %+v", r.Result, r.Error)
	}
	_, r = call(t, h, "1.0", a2av1.MethodGetPushConfig, `{"taskId":"`+id+`","id":"`+created.ID+`"}`)
	var got a2av1.TaskPushNotificationConfig
	if json.Unmarshal(r.Result, &got); got.URL != "http://127.0.0.1:9/hook" {
		t.Fatalf("get: %s %+v", r.Result, r.Error)
	}
	_, r = call(t, h, "1.0", a2av1.MethodListPushConfigs, `{"taskId":"`+id+`"}`)
	var list a2av1.ListTaskPushNotificationConfigsResponse
	if json.Unmarshal(r.Result, &list); len(list.Configs) != 1 {
		t.Fatalf("list: %s", r.Result)
	}
	_, r = call(t, h, "1.0", a2av1.MethodDeletePushConfig, `{"taskId":"`+id+`","id":"`+created.ID+`"}`)
	if r.Error != nil || string(r.Result) != "{}" {
		t.Fatalf("delete: %s %+v", r.Result, r.Error)
	}
	_, r = call(t, h, "1.0", a2av1.MethodGetPushConfig, `{"taskId":"`+id+`","id":"`+created.ID+`"}`)
	if r.Error == nil || r.Error.Code != CodeTaskNotFound {
		t.Fatalf("get after delete: %+v", r.Error)
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestCardAdvertisesBothVersions(t *testing.T) {
	h := v1Handler(t, doneExec{}, 0)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/.well-known/agent-card.json", nil))
	var card struct {
		URL                 string                 `json:"url"`
		ProtocolVersion     string                 `json:"protocolVersion"`
		SupportedInterfaces []a2av1.AgentInterface `json:"supportedInterfaces"`
		Capabilities        a2a.AgentCapabilities  `json:"capabilities"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &card); err != nil {
		t.Fatal(err)
	}
	if card.ProtocolVersion != "0.3.0" || len(card.SupportedInterfaces) != 4 ||
		card.SupportedInterfaces[0].ProtocolVersion != "1.0" || card.SupportedInterfaces[1].ProtocolVersion != "0.3" ||
		card.SupportedInterfaces[0].URL != card.URL || card.SupportedInterfaces[0].ProtocolBinding != "JSONRPC" {
		t.Fatalf("card: %s", rec.Body.String())
	}
	// The HTTP+JSON binding's routes hang off the same URL.
	if rest := card.SupportedInterfaces[2]; rest.ProtocolBinding != "HTTP+JSON" || rest.ProtocolVersion != "1.0" || rest.URL != strings.TrimSuffix(card.URL, "/") {
		t.Fatalf("HTTP+JSON interface: %+v", rest)
	}
	// The gRPC binding is on the same listener, named as a gRPC target.
	if g := card.SupportedInterfaces[3]; g != (a2av1.AgentInterface{URL: "x:80", ProtocolBinding: "GRPC", ProtocolVersion: "1.0"}) {
		t.Fatalf("gRPC interface %+v", g)
	}
	if !card.Capabilities.PushNotifications || len(card.Capabilities.Extensions) != 1 || card.Capabilities.Extensions[0].URI != a2abind.ContractExtensionURI ||
		card.Capabilities.Extensions[0].Params["instance"] != "i1" {
		t.Fatalf("capabilities: %+v", card.Capabilities)
	}
}
