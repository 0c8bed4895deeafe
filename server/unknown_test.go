package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Unrecognized fields in a request are ignored (A2A 1.0 §5.7), on both
// versions and at every level (the params, the message, a part, the send
// configuration): the task is created as without them. What the front refuses
// for safety stays refused with them around: a known field of the wrong type,
// a name given twice, a 0.3 name that matches a field only when case is
// ignored (encoding/json would set the field by it), nesting past the depth
// limit, a body over the size limit.
func TestUnknownFieldsIgnored(t *testing.T) {
	srv := httptest.NewServer(testHandler(1 << 10))
	defer srv.Close()
	post := func(version, method, params string) (int, rpcReply) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`,"future":{"x":1}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
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
		var r rpcReply
		if resp.StatusCode == 200 {
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("%s: not JSON-RPC: %v\n%s", method, err, b)
			}
		}
		return resp.StatusCode, r
	}
	taskID := func(version string, res json.RawMessage) string {
		var v struct {
			ID   string `json:"id"`
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		}
		json.Unmarshal(res, &v)
		if version == "1.0" {
			return v.Task.ID
		}
		return v.ID
	}
	for _, tc := range []struct{ version, method, params, get string }{
		{"", MethodSend, `{"tckUnknownField":1,"message":{"kind":"message","messageId":"u1","role":"user","tckUnknownField":"x","parts":[{"kind":"text","text":"hi","tckUnknownField":[1,2]}]},"configuration":{"blocking":false,"tckUnknownField":{"a":{"b":null}}}}`, MethodGet},
		{"1.0", "SendMessage", `{"tckUnknownField":1,"message":{"messageId":"u2","role":"ROLE_USER","tckUnknownField":"x","parts":[{"text":"hi","kind":"text","tckUnknownField":[1,2]}]},"configuration":{"returnImmediately":true,"tckUnknownField":{"a":{"b":null}}}}`, "GetTask"},
	} {
		code, r := post(tc.version, tc.method, tc.params)
		if code != 200 || r.Error != nil {
			t.Fatalf("%s with unknown fields: HTTP %d, %+v", tc.method, code, r.Error)
		}
		id := taskID(tc.version, r.Result)
		if id == "" {
			t.Fatalf("%s with unknown fields: no task in %s", tc.method, r.Result)
		}
		if code, r := post(tc.version, tc.get, `{"id":"`+id+`","tckUnknownField":true}`); code != 200 || r.Error != nil {
			t.Fatalf("%s of the task %s: HTTP %d, %+v", tc.get, id, code, r.Error)
		}
	}

	deep := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	for _, tc := range []struct {
		name, version, method, params string
		status, code                  int
	}{
		{"0.3, a known field of the wrong type", "", MethodSend, `{"x":1,"message":{"kind":"message","messageId":5,"role":"user","parts":[{"kind":"text","text":"hi"}]}}`, 200, CodeInvalidParams},
		{"1.0, a known field of the wrong type", "1.0", "SendMessage", `{"x":1,"message":{"messageId":5,"role":"ROLE_USER","parts":[{"text":"hi"}]}}`, 200, CodeInvalidParams},
		{"0.3, a name given twice in an unknown object", "", MethodGet, `{"id":"t","x":{"a":1,"a":2}}`, 200, CodeInvalidParams},
		{"1.0, a name given twice in an unknown object", "1.0", "GetTask", `{"id":"t","x":{"a":1,"a":2}}`, 200, CodeInvalidParams},
		{"1.0, a field given by both names", "1.0", "GetTask", `{"id":"t","x":1,"history_length":1,"historyLength":1}`, 200, CodeInvalidParams},
		{"0.3, a field name in another case", "", MethodGet, `{"id":"t","ID":"u"}`, 200, CodeInvalidParams},
		{"1.0, a message missing its id beside unknown fields", "1.0", "SendMessage", `{"message":{"MessageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}`, 200, CodeInvalidParams},
		{"0.3, nesting past the limit in an unknown field", "", MethodGet, `{"id":"t","x":` + deep + `}`, 200, CodeParseError},
		{"1.0, nesting past the limit in an unknown field", "1.0", "GetTask", `{"id":"t","x":` + deep + `}`, 200, CodeParseError},
		{"1.0, an unknown field past the body limit", "1.0", "GetTask", `{"id":"t","x":"` + strings.Repeat("x", BodyEnvelope+2<<10) + `"}`, http.StatusRequestEntityTooLarge, 0},
		{"0.3, an unknown field past the body limit", "", MethodGet, `{"id":"t","x":"` + strings.Repeat("x", BodyEnvelope+2<<10) + `"}`, http.StatusRequestEntityTooLarge, 0},
	} {
		status, r := post(tc.version, tc.method, tc.params)
		if status != tc.status || (tc.code != 0 && (r.Error == nil || r.Error.Code != tc.code)) {
			t.Errorf("%s: HTTP %d, %+v; want HTTP %d, code %d", tc.name, status, r.Error, tc.status, tc.code)
		}
	}
}
