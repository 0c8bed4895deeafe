package a2acall

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2atest"
)

// serve runs a2a-go's stock server with exec on loopback and returns a
// client of it.
func serve(t *testing.T, exec *a2atest.Executor, opts Options, wrap func(http.Handler) http.Handler) *Client {
	t.Helper()
	url := a2atest.Serve(t, a2asrv.NewHandler(exec), a2atest.Card, wrap)
	return New(url+"/", &http.Client{Timeout: a2atest.Wait}, opts)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), a2atest.Wait)
	t.Cleanup(cancel)
	return ctx
}

func artifactText(t *a2a.Task) string {
	var b strings.Builder
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				b.WriteString(tp.Text)
			}
		}
	}
	return b.String()
}

// A blocking message/send answers the completed task; tasks/get reads it
// again; tasks/cancel of a finished task is a2a.ErrTaskNotCancelable and
// tasks/get of an unknown one a2a.ErrTaskNotFound, both as *Error.
func TestSendGetAndErrors(t *testing.T) {
	c := serve(t, &a2atest.Executor{}, Options{}, nil)
	ctx := ctxT(t)
	res, err := c.SendMessage(ctx, a2atest.Msg("hi"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "echo: hi" {
		t.Fatalf("message/send: %#v", res)
	}
	got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.ID != task.ID || got.Status.State != a2a.TaskStateCompleted || artifactText(got) != "echo: hi" {
		t.Fatalf("tasks/get: %+v, %v", got, err)
	}
	_, err = c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	var rpc *Error
	if !errors.Is(err, a2a.ErrTaskNotCancelable) || !errors.As(err, &rpc) || rpc.Code != -32002 || rpc.Method != MethodCancelTask {
		t.Fatalf("tasks/cancel of a completed task: %v", err)
	}
	_, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: "no-such-task"})
	if !errors.Is(err, a2a.ErrTaskNotFound) || !errors.As(err, &rpc) || rpc.Code != -32001 {
		t.Fatalf("tasks/get of an unknown task: %v", err)
	}
}

// ticker is an executor that works until cancelled and reports "working"
// once more at each tick.
type ticker struct{ ticks chan struct{} }

func (e *ticker) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if reqCtx.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(reqCtx, reqCtx.Message)); err != nil {
			return err
		}
	}
	for {
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		select {
		case <-e.ticks:
		case <-ctx.Done():
			return nil
		}
	}
}

func (e *ticker) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// With NonBlocking, message/send answers a task that is still working;
// tasks/resubscribe follows it and ends with the cancel that tasks/cancel
// made; the header function's headers reach the server.
func TestNonBlockingResubscribeCancel(t *testing.T) {
	exec := &ticker{ticks: make(chan struct{}, 1)}
	var traced, nonBlocking atomic.Int32
	wrap := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				if r.Header.Get("traceparent") == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
					traced.Add(1)
				}
				body, _ := io.ReadAll(r.Body)
				if strings.Contains(string(body), `"blocking":false`) {
					nonBlocking.Add(1)
				}
				r.Body = io.NopCloser(strings.NewReader(string(body)))
			}
			h.ServeHTTP(w, r)
		})
	}
	url := a2atest.Serve(t, a2asrv.NewHandler(exec), a2atest.Card, wrap)
	c := New(url+"/", &http.Client{Timeout: a2atest.Wait}, Options{NonBlocking: true, Header: func(_ context.Context, h http.Header) {
		h.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	}})
	ctx := ctxT(t)
	res, err := c.SendMessage(ctx, a2atest.Msg("wait"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State.Terminal() {
		t.Fatalf("a non-blocking message/send: %#v", res)
	}
	if nonBlocking.Load() != 1 {
		t.Fatalf("the send did not ask for a non-blocking answer")
	}
	events := make(chan a2a.Event, 64)
	errs := make(chan error, 1)
	go func() {
		defer close(events)
		for ev, err := range c.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: task.ID}) {
			if err != nil {
				errs <- err
				return
			}
			events <- ev
		}
	}()
	// The stream is open once an event comes through it: tick until one
	// does.
	var first a2a.Event
	for first == nil {
		select {
		case exec.ticks <- struct{}{}:
		default:
		}
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended: %v", <-errs)
			}
			first = ev
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no event came through the stream")
		}
	}
	canceled, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	if err != nil || canceled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("tasks/cancel: %+v, %v", canceled, err)
	}
	last := first
	for ev := range events {
		last = ev
	}
	select {
	case err := <-errs:
		t.Fatalf("the stream failed: %v", err)
	default:
	}
	st, ok := last.(*a2a.TaskStatusUpdateEvent)
	if !ok || st.Status.State != a2a.TaskStateCanceled || !st.Final {
		t.Fatalf("the stream's last event: %#v", last)
	}
	if traced.Load() < 3 {
		t.Fatalf("the traceparent reached %d of the 3 requests", traced.Load())
	}
}

// message/stream yields the task's events in order, the last one its final
// completed status.
func TestSendStreaming(t *testing.T) {
	c := serve(t, &a2atest.Executor{}, Options{}, nil)
	var kinds []string
	var last a2a.Event
	for ev, err := range c.SendStreamingMessage(ctxT(t), a2atest.Msg("stream")) {
		if err != nil {
			t.Fatal(err)
		}
		switch v := ev.(type) {
		case *a2a.Task:
			kinds = append(kinds, "task")
		case *a2a.TaskStatusUpdateEvent:
			kinds = append(kinds, string(v.Status.State))
		case *a2a.TaskArtifactUpdateEvent:
			kinds = append(kinds, "artifact")
		}
		last = ev
	}
	if got := strings.Join(kinds, ","); got != "task,working,artifact,completed" {
		t.Fatalf("the events: %s", got)
	}
	if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || !st.Final {
		t.Fatalf("the last event: %#v", last)
	}
}

// A refusal before JSON-RPC is an error naming the status; an answer to
// another request id, one that is not JSON-RPC, and one over the size limit
// are errors too.
func TestBadAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"refused", http.StatusServiceUnavailable, "try later", "HTTP 503 Service Unavailable: try later"},
		{"another id", http.StatusOK, `{"jsonrpc":"2.0","id":"999","result":{"kind":"task","id":"t","contextId":"c","status":{"state":"completed"}}}`, `id "999" is not the request's`},
		{"not JSON-RPC", http.StatusOK, `<html>`, "not a JSON-RPC response"},
		{"no result", http.StatusOK, `{"jsonrpc":"2.0","id":"1"}`, "neither a result nor an error"},
		{"too large", http.StatusOK, `{"jsonrpc":"2.0","id":"1","result":"` + strings.Repeat("x", 200) + `"}`, ErrTooLarge.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "too large" {
				maxAnswer = 100
				defer func() { maxAnswer = MaxAnswer }()
			}
			c := serve(t, &a2atest.Executor{}, Options{}, func(http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(tc.status)
					io.WriteString(w, tc.body)
				})
			})
			_, err := c.GetTask(ctxT(t), &a2a.TaskQueryParams{ID: "t"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// The event-stream reader joins an event's data lines, skips comments,
// other fields and events without data, takes CRLF line ends, yields a last
// event the stream ends in, and refuses an event over the size limit.
func TestEvents(t *testing.T) {
	in := ": a comment\r\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nid: 7\n\ndata:two\n\ndata: three"
	var got []string
	for data, err := range events(strings.NewReader(in)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(data))
	}
	if want := "{\"a\":\n1}|two|three"; strings.Join(got, "|") != want {
		t.Fatalf("events %q, want %q", strings.Join(got, "|"), want)
	}
	maxAnswer = 10
	defer func() { maxAnswer = MaxAnswer }()
	var last error
	for _, err := range events(strings.NewReader("data: " + strings.Repeat("x", 64) + "\n\n")) {
		last = err
	}
	if !errors.Is(last, ErrTooLarge) {
		t.Fatalf("an event over the limit: %v", last)
	}
}

// Endpoint picks the card's URL when its preferred transport is JSON-RPC or
// unnamed, else an additional JSON-RPC interface; a card without one is
// ErrNoJSONRPC.
func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		card a2a.AgentCard
		want string
		err  error
	}{
		{a2a.AgentCard{URL: "https://a/"}, "https://a/", nil},
		{a2a.AgentCard{URL: "https://a/", PreferredTransport: a2a.TransportProtocolJSONRPC}, "https://a/", nil},
		{a2a.AgentCard{URL: "https://a:9/", PreferredTransport: a2a.TransportProtocolGRPC,
			AdditionalInterfaces: []a2a.AgentInterface{{Transport: a2a.TransportProtocolGRPC, URL: "https://a:9/"}, {Transport: a2a.TransportProtocolJSONRPC, URL: "https://a/rpc"}}}, "https://a/rpc", nil},
		{a2a.AgentCard{URL: "https://a:9/", PreferredTransport: a2a.TransportProtocolGRPC}, "", ErrNoJSONRPC},
	} {
		got, err := Endpoint(&tc.card)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("Endpoint(%+v) = %q, %v; want %q, %v", tc.card, got, err, tc.want, tc.err)
		}
	}
}
