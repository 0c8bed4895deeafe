package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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

// doneExec completes every task with one text artifact.
type doneExec struct{}

func (doneExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil))
	q.Write(ctx, &a2a.TaskArtifactUpdateEvent{TaskID: reqCtx.TaskID, ContextID: reqCtx.ContextID, Artifact: &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.TextPart{Text: "done"}}}})
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (doneExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return nil
}

// testHandler is the front over an engine whose tasks complete at once, with
// this message size limit (0: the default).
func testHandler(maxMessage int) http.Handler {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	return Handler(Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"}), MaxMessage: maxMessage})
}

// newPost is a POST of body to the JSON-RPC endpoint as clients send it,
// with Content-Type application/json.
func newPost(body io.Reader) *http.Request {
	r := httptest.NewRequest("POST", "/", body)
	r.Header.Set("Content-Type", "application/json")
	return r
}

type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *RPCError       `json:"error"`
}

func post(t *testing.T, h http.Handler, body string) (*http.Response, rpcReply) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, newPost(strings.NewReader(body)))
	resp := rec.Result()
	var r rpcReply
	if resp.StatusCode != 200 {
		return resp, r
	}
	switch resp.Header.Get("Content-Type") {
	case "application/json":
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatalf("bad JSON-RPC reply: %v", err)
		}
	case "text/event-stream":
		// The first event of a stream.
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				if err := json.Unmarshal([]byte(data), &r); err != nil {
					t.Fatalf("bad JSON-RPC event: %v", err)
				}
				break
			}
		}
	}
	return resp, r
}

func TestJSONRPCErrorCodes(t *testing.T) {
	h := testHandler(0)
	tests := []struct {
		name, body string
		code       int
		id         string
	}{
		{"not json", `{"jsonrpc":`, CodeParseError, "null"},
		{"empty body", ``, CodeParseError, "null"},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tasks/get"}]`, CodeInvalidRequest, "null"},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"tasks/get","params":{}}`, CodeInvalidRequest, "1"},
		{"missing method", `{"jsonrpc":"2.0","id":"a"}`, CodeInvalidRequest, `"a"`},
		{"method not a string", `{"jsonrpc":"2.0","id":2,"method":5}`, CodeInvalidRequest, "2"},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"tasks/get"}`, CodeInvalidRequest, "null"},
		{"unknown method", `{"jsonrpc":"2.0","id":3,"method":"tasks/explode","params":{}}`, CodeMethodNotFound, "3"},
		{"params not an object", `{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":"x"}`, CodeInvalidParams, "4"},
		{"params of the wrong type", `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"id":7}}`, CodeInvalidParams, "5"},
		{"no message id", `{"jsonrpc":"2.0","id":6,"method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"text","text":"x"}]}}}`, CodeInvalidParams, "6"},
		{"empty parts", `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[]}}}`, CodeInvalidParams, "7"},
		{"unknown task", `{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"id":"nope"}}`, CodeTaskNotFound, "8"},
		{"stream, bad params", `{"jsonrpc":"2.0","id":9,"method":"message/stream","params":{"message":{}}}`, CodeInvalidParams, "9"},
		{"resubscribe, unknown task", `{"jsonrpc":"2.0","id":10,"method":"tasks/resubscribe","params":{"id":"nope"}}`, CodeTaskNotFound, "10"},
		{"push config", `{"jsonrpc":"2.0","id":11,"method":"tasks/pushNotificationConfig/get","params":{"id":"x"}}`, CodePushNotSupported, "11"},
		{"1.0 unknown task", `{"jsonrpc":"2.0","id":12,"method":"GetTask","params":{"id":"nope"}}`, CodeTaskNotFound, "12"},
		{"1.0 bad role", `{"jsonrpc":"2.0","id":13,"method":"SendMessage","params":{"message":{"messageId":"m","role":"user","parts":[{"text":"x"}]}}}`, CodeInvalidParams, "13"},
		{"1.0 part with two contents", `{"jsonrpc":"2.0","id":14,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x","url":"https://x/y"}]}}}`, CodeInvalidParams, "14"},
		{"1.0 stream, no message", `{"jsonrpc":"2.0","id":15,"method":"SendStreamingMessage","params":{}}`, CodeInvalidParams, "15"},
		{"1.0 subscribe, unknown task", `{"jsonrpc":"2.0","id":16,"method":"SubscribeToTask","params":{"id":"nope"}}`, CodeTaskNotFound, "16"},
		{"1.0 extended card", `{"jsonrpc":"2.0","id":17,"method":"GetExtendedAgentCard"}`, CodeUnsupportedOp, "17"},
	}
	streaming03 := map[string]bool{"stream, bad params": true, "resubscribe, unknown task": true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, r := post(t, h, tt.body)
			// A 1.0 streaming method's error found before its stream starts
			// is plain JSON, a 0.3 one the stream's one event
			// (TestPreStreamErrors).
			want := "application/json"
			if streaming03[tt.name] {
				want = "text/event-stream"
			}
			if ct := resp.Header.Get("Content-Type"); ct != want {
				t.Fatalf("content type %q, want %q", ct, want)
			}
			if r.Error == nil || r.Error.Code != tt.code {
				t.Fatalf("error = %+v, want code %d", r.Error, tt.code)
			}
			if string(r.ID) != tt.id {
				t.Fatalf("id = %s, want %s", r.ID, tt.id)
			}
		})
	}
}

func TestSendAndGet(t *testing.T) {
	h := testHandler(0)
	_, r := post(t, h, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`)
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	var task a2a.Task
	if err := json.Unmarshal(r.Result, &task); err != nil || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("task %+v %v", task, err)
	}
	_, r = post(t, h, `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"`+string(task.ID)+`","historyLength":0}}`)
	var got a2a.Task
	if err := json.Unmarshal(r.Result, &got); err != nil || len(got.History) != 0 || len(got.Artifacts) != 1 || got.ID != task.ID {
		t.Fatalf("get: %+v %v", got, err)
	}
}

func TestStreamIsSSE(t *testing.T) {
	srv := httptest.NewServer(testHandler(0))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	body, _ := io.ReadAll(resp.Body)
	if n := strings.Count(string(body), "data: "); n != 4 {
		t.Fatalf("%d events, want 4 (task, working, artifact, completed):\n%s", n, body)
	}
	if !strings.Contains(string(body), `"final":true`) {
		t.Fatalf("no final event:\n%s", body)
	}
}

func TestBodyCap(t *testing.T) {
	h := testHandler(1 << 10)
	resp, _ := post(t, h, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"`+strings.Repeat("x", BodyEnvelope+2<<10)+`"}}`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}

func TestCardAndProbes(t *testing.T) {
	h := testHandler(0)
	for _, path := range []string{"/.well-known/agent-card.json", "/healthz", "/readyz"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 {
			t.Errorf("%s: %d", path, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/.well-known/agent-card.json", nil))
	var card a2a.AgentCard
	if err := json.Unmarshal(rec.Body.Bytes(), &card); err != nil || card.ProtocolVersion != "0.3.0" || len(card.Skills) == 0 || !card.Capabilities.Streaming {
		t.Fatalf("card: %+v %v", card, err)
	}
}

// FuzzJSONRPC posts arbitrary bodies: the front never panics and always answers
// with a JSON-RPC 2.0 object (or an SSE stream for valid streaming calls).
func FuzzJSONRPC(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`,
		`{"jsonrpc":"2.0","id":"s","method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tasks/cancel","params":{"id":""}}`,
		`[]`, `{}`, `null`, `{"jsonrpc":"2.0","id":1.5,"method":"x"}`,
	} {
		f.Add([]byte(s))
	}
	h := testHandler(1 << 16)
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, newPost(bytes.NewReader(body)))
		switch ct := rec.Header().Get("Content-Type"); ct {
		case "application/json":
			var r rpcReply
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.JSONRPC != "2.0" {
				t.Fatalf("reply is not JSON-RPC 2.0: %q", rec.Body.Bytes())
			}
			if (r.Error == nil) == (r.Result == nil) {
				t.Fatalf("reply has both or neither of result and error: %q", rec.Body.Bytes())
			}
		case "text/event-stream":
		default:
			if rec.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d, content type %q", rec.Code, ct)
			}
		}
	})
}

// A result written around its own MarshalJSON is the same JSON-RPC response
// encoding/json would write; a nil result is null, not a panic.
func TestWriteRPCMarshalerResult(t *testing.T) {
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	for _, tc := range []struct {
		name   string
		id     json.RawMessage
		result any
	}{
		{"task", json.RawMessage(`7`), task},
		{"string id", json.RawMessage(`"a<b>"`), task},
		{"nil task", json.RawMessage(`1`), (*a2a.Task)(nil)},
		{"plain value", json.RawMessage(`null`), map[string]int{"a": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeRPC(rec, tc.id, tc.result, nil, toRPCError)
			want, err := json.Marshal(rpcResponse{JSONRPC: "2.0", ID: tc.id, Result: tc.result})
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.Body.Bytes(); !bytes.Equal(got, want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
}

// The method table holds every A2A 1.0 method as a 1.0 entry and every 0.3
// method as a 0.3 entry; the operator methods are served whatever the
// request's version.
func TestMethodTable(t *testing.T) {
	table := methodTable(map[string]Method{"a2a.Tree": func(context.Context, json.RawMessage) (any, error) { return nil, nil }}, nil)
	for _, name := range a2av1.Methods {
		if m, ok := table[name]; !ok || m.version != a2av1.Version {
			t.Errorf("1.0 method %s: entry %+v, %v", name, m, ok)
		}
	}
	for _, name := range []string{MethodSend, MethodStream, MethodGet, MethodCancel, MethodResubscribe, MethodPushSet, MethodPushGet, MethodPushList, MethodPushDelete, MethodExtCard} {
		if m, ok := table[name]; !ok || m.version != tasks.Version03 {
			t.Errorf("0.3 method %s: entry %+v, %v", name, m, ok)
		}
	}
	if m, ok := table["a2a.Tree"]; !ok || m.version != "" {
		t.Errorf("operator method: entry %+v, %v", m, ok)
	}
	if n := len(table); n != len(a2av1.Methods)+10+1 {
		t.Errorf("%d entries", n)
	}
	for name, m := range table {
		if (m.call == nil) == (m.events == nil) || m.decode == nil {
			t.Errorf("%s: want decode and exactly one of call and events", name)
		}
	}
}
