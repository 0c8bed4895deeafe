package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An error an A2A 1.0 streaming method meets before its stream starts (bad
// params, an unknown task, a task that has ended) is one plain JSON-RPC error
// response with Content-Type application/json, not an SSE stream holding it:
// the 1.0.0 TCK and the JavaScript SDK 1.x read it in that form. An A2A 0.3
// streaming method's is the one event of a stream, the form a2a-go 0.3's
// client, the JavaScript SDK 0.3 and the 0.3 TCK read.
func TestPreStreamErrors(t *testing.T) {
	srv := httptest.NewServer(testHandler(0))
	defer srv.Close()
	call := func(version, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		if version != "" {
			req.Header.Set(VersionHeader, version)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	// A finished task, for the subscriptions that refuse one.
	_, b := call("", `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`)
	var sent rpcReply
	var task struct {
		ID     string `json:"id"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := json.Unmarshal(b, &sent); err != nil || sent.Error != nil || json.Unmarshal(sent.Result, &task) != nil || task.Status.State != "completed" {
		t.Fatalf("send: %s", b)
	}
	for _, tc := range []struct {
		name, version, body string
		code                int
	}{
		{"SendStreamingMessage, no message", "1.0", `{"jsonrpc":"2.0","id":"a","method":"SendStreamingMessage","params":{}}`, CodeInvalidParams},
		{"SendStreamingMessage, wrong type", "1.0", `{"jsonrpc":"2.0","id":"a","method":"SendStreamingMessage","params":{"message":"x"}}`, CodeInvalidParams},
		{"SendStreamingMessage, params not an object", "1.0", `{"jsonrpc":"2.0","id":"a","method":"SendStreamingMessage","params":[]}`, CodeInvalidParams},
		{"SubscribeToTask, unknown task", "1.0", `{"jsonrpc":"2.0","id":"a","method":"SubscribeToTask","params":{"id":"nope"}}`, CodeTaskNotFound},
		{"SubscribeToTask, finished task", "1.0", `{"jsonrpc":"2.0","id":"a","method":"SubscribeToTask","params":{"id":"` + task.ID + `"}}`, CodeUnsupportedOp},
		{"SubscribeToTask without the header, unknown task", "", `{"jsonrpc":"2.0","id":"a","method":"SubscribeToTask","params":{"id":"nope"}}`, CodeTaskNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := call(tc.version, tc.body)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
				t.Fatalf("HTTP %d, Content-Type %q, want 200 application/json:\n%s", resp.StatusCode, ct, b)
			}
			var r rpcReply
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("not one JSON-RPC response: %v\n%s", err, b)
			}
			if r.JSONRPC != "2.0" || string(r.ID) != `"a"` || r.Result != nil || r.Error == nil || r.Error.Code != tc.code {
				t.Fatalf(`reply %s, want error %d with id "a"`, b, tc.code)
			}
		})
	}
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"message/stream, bad params", `{"jsonrpc":"2.0","id":"a","method":"message/stream","params":{"message":{}}}`, CodeInvalidParams},
		{"tasks/resubscribe, unknown task", `{"jsonrpc":"2.0","id":"a","method":"tasks/resubscribe","params":{"id":"nope"}}`, CodeTaskNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := call("", tc.body)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
				t.Fatalf("HTTP %d, Content-Type %q, want 200 text/event-stream:\n%s", resp.StatusCode, ct, b)
			}
			var events []string
			for _, line := range strings.Split(string(b), "\n") {
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					events = append(events, data)
				}
			}
			var r rpcReply
			if len(events) != 1 || json.Unmarshal([]byte(events[0]), &r) != nil || string(r.ID) != `"a"` || r.Error == nil || r.Error.Code != tc.code {
				t.Fatalf("want one error event %d:\n%s", tc.code, b)
			}
		})
	}
	// A stream that starts is a stream.
	resp, b := call("1.0", `{"jsonrpc":"2.0","id":2,"method":"SendStreamingMessage","params":{"message":{"messageId":"m2","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || !strings.Contains(string(b), "data: ") {
		t.Fatalf("a stream that starts: %q\n%s", ct, b)
	}
}
