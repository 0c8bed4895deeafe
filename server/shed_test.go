package server

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/admit"
)

// waitExec works until its task is cancelled.
type waitExec struct{}

func (waitExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil))
	<-ctx.Done()
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(context.WithoutCancel(ctx), ev)
}

func (waitExec) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	return nil
}

// Past the admission queue, every way of sending a message is answered 429
// with Retry-After, and the JSON-RPC error carries the same hint: 0.3
// message/send and message/stream (no event stream starts), and 1.0
// SendMessage with a RetryInfo.
func TestShedAnswers429WithRetryAfter(t *testing.T) {
	ctrl, err := admit.New(admit.Config{Bounds: admit.Bounds{MaxRuns: 1, MaxLive: 1}, RunEstimate: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), waitExec{}, nil, tasks.WithAdmission(ctrl, admit.Policy{}))
	h := Handler(Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})

	send := func(method, version, params string) (*httptest.ResponseRecorder, rpcReply) {
		t.Helper()
		req := newPost(strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`))
		if version != "" {
			req.Header.Set(VersionHeader, version)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var r rpcReply
		if ct := rec.Header().Get("Content-Type"); ct == "application/json" {
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
				t.Fatalf("%s: bad JSON-RPC body %q: %v", method, rec.Body.String(), err)
			}
		}
		return rec, r
	}
	msg := func(id string) string {
		return `{"configuration":{"blocking":false},"message":{"kind":"message","messageId":"` + id + `","role":"user","parts":[{"kind":"text","text":"wait"}]}}`
	}
	rec, first := send(MethodSend, "", msg("m1"))
	if rec.Code != 200 || first.Error != nil {
		t.Fatalf("first send: HTTP %d %+v", rec.Code, first.Error)
	}
	var task a2a.Task
	if err := json.Unmarshal(first.Result, &task); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, method, version, params string
	}{
		{"0.3 message/send", MethodSend, "", msg("m2")},
		{"0.3 message/stream", MethodStream, "", msg("m3")},
		{"1.0 SendMessage", a2av1.MethodSendMessage, "1.0", `{"message":{"messageId":"m4","role":"ROLE_USER","parts":[{"text":"wait"}]}}`},
		{"1.0 SendStreamingMessage", a2av1.MethodSendStreamingMessage, "1.0", `{"message":{"messageId":"m5","role":"ROLE_USER","parts":[{"text":"wait"}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, r := send(tc.method, tc.version, tc.params)
			if rec.Code != 429 {
				t.Fatalf("HTTP %d, want 429: %s", rec.Code, rec.Body.String())
			}
			retry, err := strconv.Atoi(rec.Header().Get("Retry-After"))
			if err != nil || retry != 7 { // one run ahead, one slot, 7s each
				t.Fatalf("Retry-After %q, want 7", rec.Header().Get("Retry-After"))
			}
			if r.Error == nil || r.Error.Code != CodeServerError || string(r.ID) != "7" || !strings.Contains(r.Error.Message, "retry after 7s") {
				t.Fatalf("error %+v id %s", r.Error, r.ID)
			}
			if tc.version == "" {
				data, _ := r.Error.Data.(map[string]any)
				if data["retryAfterSeconds"] != float64(7) || data["reason"] != admit.ReasonQueueFull {
					t.Fatalf("0.3 error data %v", r.Error.Data)
				}
				return
			}
			b, _ := json.Marshal(r.Error.Data)
			var d []map[string]any
			if err := json.Unmarshal(b, &d); err != nil || len(d) != 2 {
				t.Fatalf("1.0 error data %s", b)
			}
			meta, _ := d[0]["metadata"].(map[string]any)
			if d[0]["reason"] != "RESOURCE_EXHAUSTED" || meta["retryAfterSeconds"] != "7" || meta["reason"] != admit.ReasonQueueFull ||
				d[1]["@type"] != "type.googleapis.com/google.rpc.RetryInfo" || d[1]["retryDelay"] != "7s" {
				t.Fatalf("1.0 error data %s", b)
			}
		})
	}
	if st := ctrl.Stats(); st.Shed[admit.ReasonQueueFull] != 4 || st.Runs != 1 {
		t.Fatalf("admission stats %+v", st)
	}
	// Nothing was created for the shed requests; the running task cancels.
	if rec, r := send(MethodCancel, "", `{"id":"`+string(task.ID)+`"}`); rec.Code != 200 || r.Error != nil {
		t.Fatalf("cancel: HTTP %d %+v", rec.Code, r.Error)
	}
	if n := engine.InFlight(); n != 0 {
		t.Fatalf("%d tasks live after the cancel", n)
	}
}

// readFlag is a body that records whether anyone read it.
type readFlag struct {
	r    *strings.Reader
	read bool
}

func (b *readFlag) Read(p []byte) (int, error) { b.read = true; return b.r.Read(p) }

// A body the memory gate has no room for is answered 429 with Retry-After
// and reason memory before it is read, in the JSON-RPC binding (0.3 and 1.0
// shapes) and the HTTP+JSON one; the reservation is given back once the
// request is answered.
func TestShedForMemoryBeforeTheBodyIsRead(t *testing.T) {
	ctrl, err := admit.New(admit.Config{Bounds: admit.Bounds{MaxRuns: 4, MaxLive: 4},
		Memory: admit.MemoryConfig{Limit: 100 << 20, FrontFactor: 16}})
	if err != nil {
		t.Fatal(err)
	}
	ctrl.Observe(admit.Sample{Total: 80 << 20, Self: 80 << 20})
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), waitExec{}, nil, tasks.WithAdmission(ctrl, admit.Policy{}))
	h := Handler(Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"}), ReserveMessage: ctrl.ReserveMessage})
	// One body is being read: 16 MiB held, 96 of 100.
	release, err := ctrl.ReserveMessage(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	big := `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"configuration":{"blocking":false},"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"` + strings.Repeat("x", 200_000) + `"}]}}}`
	for _, tc := range []struct{ name, path, version string }{
		{"JSON-RPC 0.3", "/", ""},
		{"JSON-RPC 1.0", "/", "1.0"},
		{"HTTP+JSON", "/message:send", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &readFlag{r: strings.NewReader(big)}
			req := httptest.NewRequest("POST", tc.path, body)
			req.Header.Set("Content-Type", "application/json")
			if tc.version != "" {
				req.Header.Set(VersionHeader, tc.version)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 429 || rec.Header().Get("Retry-After") == "" {
				t.Fatalf("HTTP %d, Retry-After %q, want 429 with one: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String())
			}
			if body.read {
				t.Fatal("the body was read before it was shed")
			}
			if !strings.Contains(rec.Body.String(), `"memory"`) {
				t.Fatalf("the answer does not name the reason memory: %s", rec.Body.String())
			}
		})
	}
	if n := engine.InFlight(); n != 0 {
		t.Fatalf("%d tasks were created for shed bodies", n)
	}
	release()
	ctrl.Observe(admit.Sample{Total: 20 << 20, Self: 20 << 20})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, newPost(strings.NewReader(big)))
	if rec.Code != 200 {
		t.Fatalf("with room: HTTP %d: %.200s", rec.Code, rec.Body.String())
	}
	if st := ctrl.MemoryStats(); st.Held == 0 || st.Reserved == 0 {
		t.Fatalf("after an admitted body: %+v, want its reservation lingering and its run's reserved", st)
	}
	var r rpcReply
	_ = json.Unmarshal(rec.Body.Bytes(), &r)
	var task a2a.Task
	_ = json.Unmarshal(r.Result, &task)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, newPost(strings.NewReader(`{"jsonrpc":"2.0","id":8,"method":"tasks/cancel","params":{"id":"`+string(task.ID)+`"}}`)))
	if rec.Code != 200 {
		t.Fatalf("cancel: HTTP %d", rec.Code)
	}
}
