package intelligence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// sseServer answers every Chat Completions request with the events of
// handler (each a data line), flushing after each; it counts the requests
// and keeps the last body.
type sseServer struct {
	*httptest.Server
	calls atomic.Int32
	body  atomic.Value // string
}

func newSSEServer(t *testing.T, handler func(w http.ResponseWriter, send func(data string))) *sseServer {
	s := &sseServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		b, _ := io.ReadAll(r.Body)
		s.body.Store(string(b))
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		handler(w, func(data string) {
			fmt.Fprintf(w, "data: %s\n\n", data)
			fl.Flush()
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func streamModel(t *testing.T, url string) Model {
	t.Helper()
	m, err := New(api.Intelligence{Endpoint: url + "/v1", Model: "m", Retries: intPtr(2), RetryBackoff: api.Duration(time.Millisecond)}, "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStreamedAnswer: with OnText set, the request asks for a stream with
// usage; the text deltas reach OnText one by one, in order, and the tool
// calls' pieces are assembled by index; the usage chunk and the finish
// reason make the Response a non-streamed answer would have made.
func TestStreamedAnswer(t *testing.T) {
	srv := newSSEServer(t, func(w http.ResponseWriter, send func(string)) {
		fmt.Fprint(w, ": keep-alive\n\n")
		send(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)
		send(`{"choices":[{"index":0,"delta":{"content":"Hel"}}]}`)
		send(`{"choices":[{"index":0,"delta":{"content":"lo, "}}]}`)
		send(`{"choices":[{"index":0,"delta":{"content":"wörld"}}]}`)
		send(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","type":"function","function":{"name":"b","arguments":""}}]}}]}`)
		send(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"a","arguments":"{\"x\""}}]}}]}`)
		send(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}},{"index":1,"function":{"arguments":"{}"}}]}}]}`)
		send(`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
		// Multi-line data: the lines join with a newline, which JSON allows.
		fmt.Fprint(w, "data: {\"choices\":[],\ndata: \"usage\":{\"prompt_tokens\":7,\"completion_tokens\":5}}\n\n")
		send(`[DONE]`)
	})
	var chunks []string
	resp, err := streamModel(t, srv.URL).Complete(context.Background(), &Request{
		Messages: []Message{{Role: RoleUser, Content: "hi"}},
		OnText:   func(s string) { chunks = append(chunks, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(chunks, "|"); got != "Hel|lo, |wörld" {
		t.Errorf("OnText got %q", got)
	}
	if resp.Content != "Hello, wörld" || resp.Finish != FinishToolCalls || resp.Usage.TokensIn != 7 || resp.Usage.TokensOut != 5 {
		t.Errorf("response %+v", resp)
	}
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].ID != "c1" || resp.ToolCalls[0].Name != "a" || string(resp.ToolCalls[0].Args) != `{"x":1}` ||
		resp.ToolCalls[1].ID != "c2" || resp.ToolCalls[1].Name != "b" || string(resp.ToolCalls[1].Args) != `{}` {
		t.Errorf("tool calls %+v", resp.ToolCalls)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(srv.body.Load().(string)), &body); err != nil {
		t.Fatal(err)
	}
	if body["stream"] != true || fmt.Sprint(body["stream_options"]) != "map[include_usage:true]" {
		t.Errorf("request body %v", body)
	}
}

// TestNoStreamWithoutOnText: without OnText the request asks for no stream.
func TestNoStreamWithoutOnText(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream"`) {
			t.Errorf("request %s", b)
		}
		fmt.Fprint(w, `{"choices":[{"finish_reason":"stop","message":{"content":"whole"}}]}`)
	}))
	defer srv.Close()
	resp, err := streamModel(t, srv.URL).Complete(context.Background(), &Request{})
	if err != nil || resp.Content != "whole" {
		t.Fatalf("%+v, %v", resp, err)
	}
}

// TestStreamAskedAnsweredWhole: a server that ignores "stream" and answers
// with a whole completion still works; OnText gets the text once.
func TestStreamAskedAnsweredWhole(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"finish_reason":"stop","message":{"content":"whole"}}]}`)
	}))
	defer srv.Close()
	var chunks []string
	resp, err := streamModel(t, srv.URL).Complete(context.Background(), &Request{OnText: func(s string) { chunks = append(chunks, s) }})
	if err != nil || resp.Content != "whole" || len(chunks) != 1 || chunks[0] != "whole" {
		t.Fatalf("%+v, %v, chunks %q", resp, err, chunks)
	}
}

// TestStreamCut: a stream that ends after some text, without a finish
// reason or [DONE], is ErrStreamCut, at once (not retried: its text went
// out already); one cut before any text is retried.
func TestStreamCut(t *testing.T) {
	srv := newSSEServer(t, func(w http.ResponseWriter, send func(string)) {
		send(`{"choices":[{"index":0,"delta":{"content":"partial "}}]}`)
		// The handler returns: the response ends, cut.
	})
	var chunks []string
	_, err := streamModel(t, srv.URL).Complete(context.Background(), &Request{OnText: func(s string) { chunks = append(chunks, s) }})
	if !errors.Is(err, ErrStreamCut) {
		t.Fatalf("err %v, want ErrStreamCut", err)
	}
	if n := srv.calls.Load(); n != 1 || len(chunks) != 1 {
		t.Errorf("%d requests, chunks %q: want one request, its one chunk", n, chunks)
	}

	// A connection closed mid-body, before any text: retried, then failed.
	hijack := newSSEServer(t, func(w http.ResponseWriter, send func(string)) {
		send(`{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	_, err = streamModel(t, hijack.URL).Complete(context.Background(), &Request{OnText: func(string) {}})
	if err == nil || hijack.calls.Load() != 3 {
		t.Errorf("err %v after %d requests, want a failure after 3", err, hijack.calls.Load())
	}
}

// TestStreamErrorEvent: an error the server reports inside the stream is a
// clear error naming its message; garbage in a data line is a decode error.
func TestStreamErrorEvent(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{`{"error":{"message":"overloaded, try later"}}`, "overloaded, try later"},
		{`not json`, "decode stream chunk 2"},
	} {
		srv := newSSEServer(t, func(w http.ResponseWriter, send func(string)) {
			send(`{"choices":[{"index":0,"delta":{"content":"a"}}]}`)
			send(tc.data)
		})
		_, err := streamModel(t, srv.URL).Complete(context.Background(), &Request{OnText: func(string) {}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.data, err, tc.want)
		}
	}
}

// TestStreamWithoutDone: a stream that ends after its finish reason without
// [DONE] is complete.
func TestStreamWithoutDone(t *testing.T) {
	srv := newSSEServer(t, func(w http.ResponseWriter, send func(string)) {
		send(`{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`)
	})
	resp, err := streamModel(t, srv.URL).Complete(context.Background(), &Request{OnText: func(string) {}})
	if err != nil || resp.Content != "ok" || resp.Finish != FinishStop {
		t.Fatalf("%+v, %v", resp, err)
	}
}

// FuzzReadStream feeds arbitrary bytes to the stream decoder: it returns an
// answer or an error, and what it hands OnText is the answer's text.
func FuzzReadStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":3,\"delta\":{\"tool_calls\":[{\"index\":2,\"function\":{\"arguments\":\"{\"}}]}}]}\n\n"))
	f.Add([]byte(": c\r\nevent: x\r\ndata: {\"error\":\"e\"}\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var text strings.Builder
		cr, err := readStream(strings.NewReader(string(b)), func(s string) { text.WriteString(s) })
		if err != nil {
			return
		}
		if got := cr.Choices[0].Message.Content.text(); got != text.String() {
			t.Fatalf("content %q, OnText got %q", got, text.String())
		}
	})
}
