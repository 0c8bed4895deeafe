package a2arest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2acall"
)

// An answer over the size limit is an error, not a truncated task: a
// response body, and one event of a stream.
func TestClientBoundsAnswers(t *testing.T) {
	old := maxAnswer
	maxAnswer = 1 << 10
	defer func() { maxAnswer = old }()
	big := strings.Repeat("x", 2<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ":subscribe") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"task\":{\"id\":\"t\",\"status\":{\"state\":\"TASK_STATE_WORKING\"},\"metadata\":{\"pad\":%q}}}\n\n", big)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"t","status":{"state":"TASK_STATE_WORKING"},"metadata":{"pad":%q}}`, big)
	}))
	defer srv.Close()
	cl := New(srv.URL, srv.Client(), a2acall.Options{})
	if _, err := cl.GetTask(context.Background(), &a2a.TaskQueryParams{ID: "t"}); !errors.Is(err, a2acall.ErrTooLarge) {
		t.Fatalf("GetTask: %v, want ErrTooLarge", err)
	}
	for _, err := range cl.ResubscribeToTask(context.Background(), &a2a.TaskIDParams{ID: "t"}) {
		if !errors.Is(err, a2acall.ErrTooLarge) {
			t.Fatalf("stream: %v, want ErrTooLarge", err)
		}
	}
}

// A stream's error event ends it with the error it carries; a 2xx answer
// that is no event stream is refused.
func TestClientStreamErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tasks/plain:subscribe" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{}`))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": hello\n\ndata: {\"statusUpdate\":{\"taskId\":\"t\",\"contextId\":\"c\",\"status\":{\"state\":\"TASK_STATE_WORKING\"}}}\n\n")
		fmt.Fprint(w, "event: error\ndata: {\"error\":{\"code\":404,\"status\":\"NOT_FOUND\",\"message\":\"gone\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"TASK_NOT_FOUND\",\"domain\":\"a2a-protocol.org\"}]}}\n\n")
	}))
	defer srv.Close()
	cl := New(srv.URL, srv.Client(), a2acall.Options{})
	var got []string
	for ev, err := range cl.ResubscribeToTask(context.Background(), &a2a.TaskIDParams{ID: "t"}) {
		if err != nil {
			if !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("error event: %v", err)
			}
			got = append(got, "error")
			continue
		}
		got = append(got, fmt.Sprintf("%T", ev))
	}
	if strings.Join(got, ",") != "*a2a.TaskStatusUpdateEvent,error" {
		t.Fatalf("events %v", got)
	}
	for _, err := range cl.ResubscribeToTask(context.Background(), &a2a.TaskIDParams{ID: "plain"}) {
		if !errors.Is(err, a2a.ErrInvalidAgentResponse) {
			t.Fatalf("plain answer to a stream: %v", err)
		}
	}
}
