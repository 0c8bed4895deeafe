package e2e

// The checks of the public A2A TCK (a2aproject/a2a-tck at b03fefc, spec 0.3:
// tests/mandatory and tests/optional/capabilities), ported to Go as black-box
// tests against `agentd serve`, so CI guards them without Python. The facts
// are the TCK's; the code is not.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testkit"
)

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcError       `json:"error"`
}

// post sends body to the JSON-RPC endpoint with an optional A2A-Version.
func post(t *testing.T, s *service, version, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// rpc calls method and decodes its result into out; it returns the error
// object, if any.
func rpc(t *testing.T, s *service, version, method, params string, out any) *rpcError {
	t.Helper()
	resp, b := post(t, s, version, fmt.Sprintf(`{"jsonrpc":"2.0","id":"r1","method":%q,"params":%s}`, method, params))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s: status %d, content type %q", method, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var r rpcReply
	if err := json.Unmarshal(b, &r); err != nil || r.JSONRPC != "2.0" || string(r.ID) != `"r1"` {
		t.Fatalf("%s: not a JSON-RPC 2.0 reply with the request's id: %s", method, b)
	}
	if r.Error != nil {
		return r.Error
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			t.Fatalf("%s: result %s: %v", method, r.Result, err)
		}
	}
	return nil
}

// wireTask is the 0.3 JSON of a task, as a TCK reads it.
type wireTask struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string          `json:"state"`
		Message json.RawMessage `json:"message"`
	} `json:"status"`
	History   []json.RawMessage `json:"history"`
	Artifacts []json.RawMessage `json:"artifacts"`
}

var liveStates = map[string]bool{"submitted": true, "working": true, "input-required": true, "completed": true}

func textParams(text, extra string) string {
	return fmt.Sprintf(`{"message":{"kind":"message","messageId":"tck-%d","role":"user","parts":[{"kind":"text","text":%q}]%s}}`, time.Now().UnixNano(), text, extra)
}

// stream posts a streaming call and returns each event's JSON-RPC object, up
// to max events (the stream is then closed), with the response. An error
// found before a 1.0 stream starts is a plain JSON-RPC response
// (application/json): it is returned as the one reply.
func stream(t *testing.T, s *service, method, params string, max int) (*http.Response, []rpcReply) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/", strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":%s}`, method, params)))
	req.Header.Set("Content-Type", "application/json") // as every A2A client sends it (a body without one is 415)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []rpcReply
	if resp.Header.Get("Content-Type") == "application/json" {
		var r rpcReply
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || string(r.ID) != "7" || r.Error == nil {
			t.Fatalf("%s: a JSON answer that is not a JSON-RPC error with the request's id: %+v %v", method, r, err)
		}
		return resp, []rpcReply{r}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && len(events) < max {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var r rpcReply
		if err := json.Unmarshal([]byte(data), &r); err != nil || string(r.ID) != "7" {
			t.Fatalf("%s: event is not a JSON-RPC reply with the request's id: %s", method, data)
		}
		events = append(events, r)
	}
	return resp, events
}

// tckService is agentd configured as the TCK needs it: a model that thinks
// long enough for tasks to outlive a bounded blocking send (cancel and
// follow-up checks), and webhooks allowed on loopback (the test's receiver).
func tckService(t *testing.T) *service {
	return startService(t, "--intelligence", "builtin:demo=1s", "--send-wait", "100ms", "--push-allow-net", "127.0.0.0/8,::1/128")
}

func TestTCKJSONRPC(t *testing.T) {
	t.Parallel()
	s := startService(t)
	for _, raw := range []string{
		`{"jsonrpc": "2.0", "method": "message/send", "params": {"foo": "bar"}`,
		`{"jsonrpc": "2.0", "method": "message/send", "params": {"unclosed_object": true`,
	} {
		resp, b := post(t, s, "", raw)
		var r rpcReply
		if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil || r.Error == nil || r.Error.Code != -32700 || string(r.ID) != "null" {
			t.Errorf("malformed JSON: %d %s, want -32700 with id null", resp.StatusCode, b)
		}
	}
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{"jsonrpc":"aaa","method":"message/send","params":{},"id":1}`, -32600},
		{`{"jsonrpc":"2.0","params":{},"id":1}`, -32600},
		{`{"jsonrpc":"2.0","method":"message/ssend","params":{},"id":1}`, -32601},
		{`{"jsonrpc":"2.0","method":"message/send","params":{},"id":{"bad":"type"}}`, -32600},
		{`{"jsonrpc":"2.0","method":"message/send","params":{"":"not_a_dict"},"id":1}`, -32602},
		{`{"jsonrpc":"2.0","method":"message/send","params":{"message":{"parts":"invalid"}},"id":1}`, -32602},
		{`{"jsonrpc":"2.0","method":"nonexistent/method","params":{},"id":1}`, -32601},
		{`{"jsonrpc":"1.0","method":"message/send","params":{},"id":1}`, -32600},
	} {
		resp, b := post(t, s, "", tc.body)
		var r rpcReply
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &r) != nil || r.Error == nil || r.Error.Code != tc.code {
			t.Errorf("%s: %d %s, want error %d", tc.body, resp.StatusCode, b, tc.code)
		}
	}
	// A repeated request id is answered each time, with that id.
	for i := 0; i < 2; i++ {
		var task wireTask
		if e := rpc(t, s, "", "message/send", textParams("same id", ""), &task); e != nil {
			t.Fatalf("duplicate id, call %d: %+v", i, e)
		}
	}
}

func TestTCKAgentCard(t *testing.T) {
	t.Parallel()
	s := startService(t)
	resp, err := http.Get(s.url + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card map[string]any
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&card) != nil {
		t.Fatalf("card: %d", resp.StatusCode)
	}
	for _, f := range []string{"name", "description", "url", "version", "protocolVersion", "preferredTransport"} {
		if v, ok := card[f].(string); !ok || v == "" {
			t.Errorf("card.%s is not a non-empty string: %v", f, card[f])
		}
	}
	if !strings.HasPrefix(card["url"].(string), "http") || card["protocolVersion"] != "0.3.0" || card["preferredTransport"] != "JSONRPC" {
		t.Errorf("card url/protocolVersion/preferredTransport: %v %v %v", card["url"], card["protocolVersion"], card["preferredTransport"])
	}
	for _, f := range []string{"defaultInputModes", "defaultOutputModes", "skills"} {
		if list, ok := card[f].([]any); !ok || len(list) == 0 {
			t.Errorf("card.%s is not a non-empty array", f)
		}
	}
	for i, sk := range card["skills"].([]any) {
		skill := sk.(map[string]any)
		for _, f := range []string{"id", "name", "description"} {
			if v, _ := skill[f].(string); v == "" {
				t.Errorf("skills[%d].%s missing", i, f)
			}
		}
		if _, ok := skill["tags"].([]any); !ok {
			t.Errorf("skills[%d].tags is not an array", i)
		}
	}
	caps, ok := card["capabilities"].(map[string]any)
	if !ok || caps["streaming"] != true || caps["pushNotifications"] != true {
		t.Fatalf("capabilities: %v", card["capabilities"])
	}
	seen := map[string]bool{}
	for i, e := range caps["extensions"].([]any) {
		ext := e.(map[string]any)
		uri, _ := ext["uri"].(string)
		if strings.TrimSpace(uri) == "" || uri != strings.TrimSpace(uri) || seen[uri] {
			t.Errorf("extensions[%d].uri %q: empty, padded or repeated", i, uri)
		}
		seen[uri] = true
		if _, ok := ext["params"].(map[string]any); !ok {
			t.Errorf("extensions[%d].params is not an object", i)
		}
	}
}

func TestTCKMessagesAndTasks(t *testing.T) {
	t.Parallel()
	s := tckService(t)
	var task wireTask
	if e := rpc(t, s, "", "message/send", textParams("Hello from TCK!", ""), &task); e != nil {
		t.Fatal(e)
	}
	if task.Kind != "task" || task.ID == "" || task.ContextID == "" || !liveStates[task.Status.State] {
		t.Fatalf("message/send: %+v", task)
	}
	if e := rpc(t, s, "", "message/send", `{"message":{"kind":"message"}}`, nil); e == nil || e.Code != -32602 {
		t.Fatalf("message without id, role and parts: %+v", e)
	}

	t.Run("continue the task", func(t *testing.T) {
		var next wireTask
		if e := rpc(t, s, "", "message/send", textParams("Follow-up message for the existing task", `,"taskId":"`+task.ID+`"`), &next); e != nil {
			t.Fatal(e)
		}
		if next.ID != task.ID || !liveStates[next.Status.State] {
			t.Fatalf("follow-up: %s %s", next.ID, next.Status.State)
		}
		if e := rpc(t, s, "", "message/send", textParams("with the context too", `,"taskId":"`+task.ID+`","contextId":"`+task.ContextID+`"`), &next); e != nil || next.ID != task.ID {
			t.Fatalf("follow-up with contextId: %+v %s", e, next.ID)
		}
	})

	t.Run("history length", func(t *testing.T) {
		var created wireTask
		rpc(t, s, "", "message/send", textParams("Initial message for history test", ""), &created)
		for i := 1; i <= 3; i++ {
			if e := rpc(t, s, "", "message/send", textParams(fmt.Sprintf("Follow-up message %d for history test", i), `,"taskId":"`+created.ID+`"`), nil); e != nil {
				t.Fatalf("follow-up %d: %+v", i, e)
			}
		}
		var full, limited wireTask
		rpc(t, s, "", "tasks/get", `{"id":"`+created.ID+`"}`, &full)
		rpc(t, s, "", "tasks/get", `{"id":"`+created.ID+`","historyLength":2}`, &limited)
		if len(full.History) < 4 || len(limited.History) != 2 {
			t.Fatalf("history: full %d, limited %d", len(full.History), len(limited.History))
		}
	})

	t.Run("get", func(t *testing.T) {
		var got wireTask
		if e := rpc(t, s, "", "tasks/get", `{"id":"`+task.ID+`","historyLength":1}`, &got); e != nil || got.ID != task.ID || len(got.History) > 1 {
			t.Fatalf("tasks/get: %+v %+v", got, e)
		}
		if e := rpc(t, s, "", "tasks/get", `{"id":"nonexistent-task-id"}`, nil); e == nil || e.Code != -32001 {
			t.Fatalf("unknown task: %+v", e)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		var created, canceled wireTask
		rpc(t, s, "", "message/send", textParams("Task for cancel test", ""), &created)
		if e := rpc(t, s, "", "tasks/cancel", `{"id":"`+created.ID+`"}`, &canceled); e != nil || canceled.ID != created.ID || canceled.Status.State != "canceled" {
			t.Fatalf("tasks/cancel: %+v %+v", canceled, e)
		}
		if e := rpc(t, s, "", "tasks/cancel", `{"id":"`+created.ID+`"}`, nil); e == nil || e.Code != -32002 {
			t.Fatalf("cancel twice: %+v", e)
		}
		if e := rpc(t, s, "", "tasks/cancel", `{"id":"nonexistent-task-id"}`, nil); e == nil || e.Code != -32001 {
			t.Fatalf("cancel an unknown task: %+v", e)
		}
	})
}

func TestTCKStreaming(t *testing.T) {
	t.Parallel()
	s := tckService(t)
	resp, events := stream(t, s, "message/stream", textParams("Stream test message", ""), 10)
	if resp.Header.Get("Content-Type") != "text/event-stream" || len(events) < 3 {
		t.Fatalf("message/stream: %q, %d events", resp.Header.Get("Content-Type"), len(events))
	}
	var first struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
	}
	json.Unmarshal(events[0].Result, &first)
	if first.Kind != "task" || first.ID == "" {
		t.Fatalf("the first event is not the task: %s", events[0].Result)
	}
	for i, ev := range events {
		var e struct {
			Kind   string `json:"kind"`
			TaskID string `json:"taskId"`
			Final  bool   `json:"final"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		if ev.Error != nil || json.Unmarshal(ev.Result, &e) != nil {
			t.Fatalf("event %d: %+v", i, ev)
		}
		switch e.Kind {
		case "task", "message":
		case "status-update", "artifact-update":
			if e.TaskID != first.ID {
				t.Fatalf("event %d for task %q", i, e.TaskID)
			}
		default:
			t.Fatalf("event %d has kind %q", i, e.Kind)
		}
		if i == len(events)-1 && (e.Status.State != "completed" || !e.Final) {
			t.Fatalf("the last event is not the final completed status: %s", ev.Result)
		}
	}

	// A 0.3 stream's early error is its one event (a 1.0 one is plain JSON).
	resp, events = stream(t, s, "message/stream", `{"invalid":"params"}`, 3)
	if resp.Header.Get("Content-Type") != "text/event-stream" || len(events) != 1 || events[0].Error == nil || events[0].Error.Code != -32602 {
		t.Fatalf("message/stream with bad params: %+v", events)
	}

	t.Run("resubscribe", func(t *testing.T) {
		// Read the start of a stream, then subscribe again while it runs.
		_, start := stream(t, s, "message/stream", textParams("Test message for resubscribe", ""), 1)
		var task wireTask
		json.Unmarshal(start[0].Result, &task)
		_, again := stream(t, s, "tasks/resubscribe", `{"id":"`+task.ID+`"}`, 10)
		if len(again) < 2 {
			t.Fatalf("resubscribe: %d events", len(again))
		}
		var snap wireTask
		json.Unmarshal(again[0].Result, &snap)
		if snap.Kind != "task" || snap.ID != task.ID {
			t.Fatalf("resubscribe does not start with the task: %s", again[0].Result)
		}
		var last struct {
			Status struct{ State string } `json:"status"`
		}
		json.Unmarshal(again[len(again)-1].Result, &last)
		if last.Status.State != "completed" {
			t.Fatalf("resubscribe did not follow the task to its end: %s", again[len(again)-1].Result)
		}
		// A finished task: its final snapshot.
		_, done := stream(t, s, "tasks/resubscribe", `{"id":"`+task.ID+`"}`, 10)
		if len(done) != 1 || done[0].Error != nil {
			t.Fatalf("resubscribe to a finished task: %+v", done)
		}
		_, missing := stream(t, s, "tasks/resubscribe", `{"id":"non-existent-task-id-1"}`, 10)
		if len(missing) != 1 || missing[0].Error == nil || !strings.Contains(strings.ToLower(missing[0].Error.Message), "not found") {
			t.Fatalf("resubscribe to an unknown task: %+v", missing)
		}
	})
}

// receiver is a webhook that records notifications.
type receiver struct {
	mu     sync.Mutex
	bodies []map[string]any
	tokens []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body map[string]any
	json.NewDecoder(req.Body).Decode(&body)
	r.mu.Lock()
	r.bodies = append(r.bodies, body)
	r.tokens = append(r.tokens, req.Header.Get("X-A2A-Notification-Token"))
	r.mu.Unlock()
	w.WriteHeader(200)
}

func TestTCKPushNotifications(t *testing.T) {
	t.Parallel()
	s := tckService(t)
	newTask := func() string {
		var task wireTask
		if e := rpc(t, s, "", "message/send", textParams("Task for push notification config test", ""), &task); e != nil {
			t.Fatal(e)
		}
		return task.ID
	}
	type cfg struct {
		TaskID string `json:"taskId"`
		Config struct {
			ID  string `json:"id"`
			URL string `json:"url"`
		} `json:"pushNotificationConfig"`
	}
	id := newTask()
	var set cfg
	if e := rpc(t, s, "", "tasks/pushNotificationConfig/set", `{"taskId":"`+id+`","pushNotificationConfig":{"url":"https://example.com/webhook"}}`, &set); e != nil || set.Config.URL != "https://example.com/webhook" || set.Config.ID == "" {
		t.Fatalf("set: %+v %+v", set, e)
	}
	var got cfg
	if e := rpc(t, s, "", "tasks/pushNotificationConfig/get", `{"id":"`+id+`","pushNotificationConfigId":"default"}`, &got); e != nil || got.Config.URL != "https://example.com/webhook" {
		t.Fatalf("get the default config: %+v %+v", got, e)
	}
	var list []cfg
	if e := rpc(t, s, "", "tasks/pushNotificationConfig/list", `{"id":"`+id+`"}`, &list); e != nil || len(list) != 1 || list[0].TaskID != id {
		t.Fatalf("list: %+v %+v", list, e)
	}
	var deleted json.RawMessage
	if e := rpc(t, s, "", "tasks/pushNotificationConfig/delete", `{"id":"`+id+`","pushNotificationConfigId":"`+set.Config.ID+`"}`, &deleted); e != nil || string(deleted) != "null" {
		t.Fatalf("delete: %s %+v", deleted, e)
	}
	if e := rpc(t, s, "", "tasks/pushNotificationConfig/delete", `{"id":"`+id+`","pushNotificationConfigId":"nonexistent-config-id"}`, nil); e != nil {
		t.Fatalf("deleting an unknown config is not idempotent: %+v", e)
	}
	if e := rpc(t, s, "", "tasks/pushNotificationConfig/list", `{"id":"`+newTask()+`"}`, &list); e != nil || list == nil || len(list) != 0 {
		t.Fatalf("list on a task without configs: %+v %+v", list, e)
	}
	for _, call := range []string{
		`"tasks/pushNotificationConfig/set","params":{"taskId":"nonexistent-task-id","pushNotificationConfig":{"url":"https://example.com/webhook"}}`,
		`"tasks/pushNotificationConfig/get","params":{"id":"nonexistent-task-id","pushNotificationConfigId":"default"}`,
		`"tasks/pushNotificationConfig/delete","params":{"id":"nonexistent-task-id","pushNotificationConfigId":"some-config-id"}`,
	} {
		_, b := post(t, s, "", `{"jsonrpc":"2.0","id":1,"method":`+call+`}`)
		var r rpcReply
		json.Unmarshal(b, &r)
		if r.Error == nil || !strings.Contains(strings.ToLower(r.Error.Message), "task") {
			t.Errorf("%s: %s", call, b)
		}
	}
	// agentd refuses webhooks on private ranges it was not told to allow.
	if e := rpc(t, s, "", "tasks/pushNotificationConfig/set", `{"taskId":"`+id+`","pushNotificationConfig":{"url":"http://10.1.2.3/hook"}}`, nil); e == nil || e.Code != -32602 {
		t.Fatalf("private webhook: %+v", e)
	}

	t.Run("config in message/send is used", func(t *testing.T) {
		hook := &receiver{}
		srv := httptest.NewServer(hook)
		defer srv.Close()
		var task wireTask
		if e := rpc(t, s, "", "message/send", `{"message":{"kind":"message","messageId":"test-push-config-in-send-1","role":"user","parts":[{"kind":"text","text":"Task with push notification config"}]},
			"configuration":{"pushNotificationConfig":{"url":"`+srv.URL+`/webhook","token":"test-token-123"}}}`, &task); e != nil {
			t.Fatal(e)
		}
		var list []cfg
		rpc(t, s, "", "tasks/pushNotificationConfig/list", `{"id":"`+task.ID+`"}`, &list)
		if len(list) != 1 || list[0].Config.URL != srv.URL+"/webhook" {
			t.Fatalf("the config from message/send was not kept: %+v", list)
		}
		testkit.WaitFor(t, 15*time.Second, "a notification with the task's id and state completed", func() bool {
			hook.mu.Lock()
			defer hook.mu.Unlock()
			for _, b := range hook.bodies {
				if st, _ := b["status"].(map[string]any); b["id"] == task.ID && st["state"] == "completed" {
					return true
				}
			}
			return false
		})
		hook.mu.Lock()
		defer hook.mu.Unlock()
		for i, tok := range hook.tokens {
			if tok != "test-token-123" {
				t.Fatalf("notification %d carried token %q", i, tok)
			}
		}
	})
}

// TestTCKVersion1 checks the same service through A2A 1.0 on the same
// endpoint: the proto3-JSON shapes and the A2A-Version header.
func TestTCKVersion1(t *testing.T) {
	t.Parallel()
	s := startService(t)
	var sent struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State     string `json:"state"`
				Timestamp string `json:"timestamp"`
			} `json:"status"`
			Artifacts []struct {
				Parts []map[string]any `json:"parts"`
			} `json:"artifacts"`
		} `json:"task"`
	}
	if e := rpc(t, s, "1.0", "SendMessage", `{"message":{"messageId":"v1","role":"ROLE_USER","parts":[{"text":"one two"}]}}`, &sent); e != nil {
		t.Fatal(e)
	}
	if sent.Task.Status.State != "TASK_STATE_COMPLETED" || sent.Task.Artifacts[0].Parts[0]["text"] != `"one two" has 2 words and 7 characters` {
		t.Fatalf("SendMessage: %+v", sent)
	}
	if _, err := time.Parse(time.RFC3339, sent.Task.Status.Timestamp); err != nil {
		t.Fatalf("timestamp: %v", err)
	}
	var t03 wireTask
	if e := rpc(t, s, "", "tasks/get", `{"id":"`+sent.Task.ID+`"}`, &t03); e != nil || t03.Status.State != "completed" {
		t.Fatalf("the 1.0 task through 0.3: %+v %+v", t03, e)
	}
	if e := rpc(t, s, "9.9", "GetTask", `{"id":"x"}`, nil); e == nil || e.Code != -32009 {
		t.Fatalf("unsupported version: %+v", e)
	}
}
