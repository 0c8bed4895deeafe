package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An error a streaming method meets before its stream starts (bad params, an
// unknown task, a task that has ended) is one plain JSON-RPC error response
// with Content-Type application/json, not an SSE stream holding it: the
// JavaScript client and the 1.0 TCK read it only in that form.
func TestPreStreamErrorIsJSON(t *testing.T) {
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
		{"message/stream, bad params", "", `{"jsonrpc":"2.0","id":"a","method":"message/stream","params":{"message":{}}}`, CodeInvalidParams},
		{"message/stream, params not an object", "", `{"jsonrpc":"2.0","id":"a","method":"message/stream","params":[]}`, CodeInvalidParams},
		{"tasks/resubscribe, unknown task", "", `{"jsonrpc":"2.0","id":"a","method":"tasks/resubscribe","params":{"id":"nope"}}`, CodeTaskNotFound},
		{"SendStreamingMessage, no message", "1.0", `{"jsonrpc":"2.0","id":"a","method":"SendStreamingMessage","params":{}}`, CodeInvalidParams},
		{"SendStreamingMessage, wrong type", "1.0", `{"jsonrpc":"2.0","id":"a","method":"SendStreamingMessage","params":{"message":"x"}}`, CodeInvalidParams},
		{"SubscribeToTask, unknown task", "1.0", `{"jsonrpc":"2.0","id":"a","method":"SubscribeToTask","params":{"id":"nope"}}`, CodeTaskNotFound},
		{"SubscribeToTask, finished task", "1.0", `{"jsonrpc":"2.0","id":"a","method":"SubscribeToTask","params":{"id":"` + task.ID + `"}}`, CodeUnsupportedOp},
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
	// A stream that starts is still a stream.
	resp, b := call("1.0", `{"jsonrpc":"2.0","id":2,"method":"SendStreamingMessage","params":{"message":{"messageId":"m2","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || !strings.Contains(string(b), "data: ") {
		t.Fatalf("a stream that starts: %q\n%s", ct, b)
	}
}
