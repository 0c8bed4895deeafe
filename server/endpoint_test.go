package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
)

// fixedTask answers every tasks/get with one task.
type fixedTask struct {
	*tasks.Engine
	task *a2a.Task
}

func (f fixedTask) OnGetTask(context.Context, *a2a.TaskQueryParams) (*a2a.Task, error) {
	return f.task, nil
}

// rereadBody is a request body read again from its start on each request.
type rereadBody struct{ *bytes.Reader }

func (rereadBody) Close() error { return nil }

// TestRPCEndpointAllocs pins what the front costs a JSON-RPC call beyond
// the method: a tasks/get answered with a stored task goes through the
// origin check, the server span (recording nothing, as serve runs without
// an exporter), authentication, the envelope's and the params' checks, the
// dispatch and the answer's encoding in at most 26 allocations (2 of them
// this test's writer refusing the body deadline). Before it took 39: the
// router's routing context and the request's copy that carries it (the
// endpoint is now served without the router's per-request work), the
// A2A-Version header's name canonicalized anew, the method's name and the
// "2.0" copied from the body (a name of the method table is now the table's
// string, and "2.0" is compared where it lies), the
// authentication's debug record built for a logger that drops it, and the
// span's options, attributes and traceparent lookup
// (TestServeA2ANonRecordingAllocs).
func TestRPCEndpointAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(noop.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	task := &a2a.Task{ID: "t-1", ContextID: "c-1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &now}}
	h := Handler(Config{Handler: fixedTask{Engine: tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), doneExec{}, nil), task: task},
		Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t-1"}}`)
	rd := bytes.NewReader(body)
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = int64(len(body))
	r.Body = rereadBody{rd}
	w := &headerOnlyWriter{h: http.Header{}}
	serve := func() {
		rd.Reset(body)
		clear(w.h)
		h.ServeHTTP(w, r)
	}
	serve()
	if ct := w.h.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q: the call was not answered", ct)
	}
	if n := testing.AllocsPerRun(100, serve); n > 26 {
		t.Errorf("a tasks/get through the front: %v allocations, want at most 26", n)
	}
}
