package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
)

const sendHello = `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`

// Only a JSON body is executed: a web page can send text/plain, a form, a
// multipart body or a body without a type without a CORS preflight.
func TestContentType(t *testing.T) {
	h := testHandler(0)
	for _, tc := range []struct {
		ct   string
		want int
	}{
		{"", http.StatusUnsupportedMediaType},
		{"text/plain", http.StatusUnsupportedMediaType},
		{"text/plain;charset=UTF-8", http.StatusUnsupportedMediaType},
		{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"multipart/form-data; boundary=x", http.StatusUnsupportedMediaType},
		{"application/jsonx", http.StatusUnsupportedMediaType},
		{"application/json; charset=latin1", http.StatusUnsupportedMediaType},
		{"application/json;;", http.StatusUnsupportedMediaType},
		{"application/json", http.StatusOK},
		{"Application/JSON; charset=utf-8", http.StatusOK},
		{"application/a2a+json", http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/", strings.NewReader(sendHello))
		if tc.ct != "" {
			req.Header.Set("Content-Type", tc.ct)
		}
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("Content-Type %q: HTTP %d, want %d (%s)", tc.ct, rec.Code, tc.want, rec.Body)
		}
		if tc.want == http.StatusOK && !strings.Contains(rec.Body.String(), `"state":"completed"`) {
			t.Errorf("Content-Type %q: %s", tc.ct, rec.Body)
		}
	}
}

// Reserved agentd/ metadata a caller sets is dropped from the message and the
// request before the task is stored; the keys agentd reads as input stay.
func TestReservedMetadataStripped(t *testing.T) {
	h := testHandler(0)
	meta := `{"agentd/caller":"spiffe://x/admin","agentd/parent_task":"t0","agentd/agent_path":"0.1","agentd/status":"completed",` +
		`"agentd/skill":"summarize","agentd/depth":1,"agentd/priority":"high","agentd/budget":{"max_tokens":5},"other":"kept"}`
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}],"metadata":` + meta + `},"metadata":` + meta + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":` + meta + `},"metadata":` + meta + `}}`,
	} {
		_, r := post(t, h, body)
		if r.Error != nil {
			t.Fatalf("send: %+v", r.Error)
		}
		var res struct {
			ID   string `json:"id"`
			Task struct {
				ID string `json:"id"`
			} `json:"task"`
		}
		json.Unmarshal(r.Result, &res)
		id := res.ID + res.Task.ID
		_, r = post(t, h, `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"`+id+`"}}`)
		var task a2a.Task
		if r.Error != nil || json.Unmarshal(r.Result, &task) != nil || len(task.History) == 0 {
			t.Fatalf("get %s: %+v %s", id, r.Error, r.Result)
		}
		for where, m := range map[string]map[string]any{"task": task.Metadata, "message": task.History[0].Metadata} {
			for _, k := range []string{"agentd/caller", "agentd/parent_task", "agentd/agent_path", "agentd/status"} {
				if _, ok := m[k]; ok {
					t.Errorf("%s metadata kept the caller's %s: %v", where, k, m)
				}
			}
			for _, k := range []string{"agentd/skill", "agentd/depth", "agentd/priority", "agentd/budget", "other"} {
				if _, ok := m[k]; !ok {
					t.Errorf("%s metadata lost %s: %v", where, k, m)
				}
			}
		}
	}
}

// A message over the message size limit is refused with -32602 naming the
// limit, measured as it would be encoded (a '<' is six bytes there); a body
// over the body limit is 413.
func TestMessageSizeLimit(t *testing.T) {
	const limit = 64 << 10
	h := testHandler(limit)
	send := func(text string) rpcReply {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{
			"message": map[string]any{"messageId": "m", "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}}}})
		_, r := post(t, h, string(b))
		return r
	}
	if r := send(strings.Repeat("x", limit-1024)); r.Error != nil {
		t.Fatalf("a message under the limit: %+v", r.Error)
	}
	for _, text := range []string{strings.Repeat("x", limit+1), strings.Repeat("<", limit/4)} {
		r := send(text)
		if r.Error == nil || r.Error.Code != CodeInvalidParams || !strings.Contains(r.Error.Message, "65536 bytes") || !strings.Contains(r.Error.Message, "--max-message") {
			t.Fatalf("a message over the limit: %+v", r.Error)
		}
	}
	// The 1.0 send measures the same message.
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": map[string]any{
		"message": map[string]any{"messageId": "m", "role": "ROLE_USER", "parts": []any{map[string]any{"text": strings.Repeat("x", limit+1)}}}}})
	if _, r := post(t, h, string(b)); r.Error == nil || r.Error.Code != CodeInvalidParams || !strings.Contains(r.Error.Message, "65536 bytes") {
		t.Fatalf("a 1.0 message over the limit: %+v", r.Error)
	}
	resp, _ := post(t, h, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"`+strings.Repeat("x", limit+BodyEnvelope)+`"}}`)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the limit: HTTP %d", resp.StatusCode)
	}
}

// A caller refused for its credentials gets its connection closed with the
// answer.
func TestRefusalClosesConnection(t *testing.T) {
	tokens, err := ParseTokens([]byte(operatorToken + " operator admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(Handler(Config{Auth: &Auth{Tokens: tokens}}))
	defer srv.Close()
	for _, tok := range []string{"", "wrong-token-0123456789"} {
		req, _ := http.NewRequest("POST", srv.URL+"/", strings.NewReader(sendHello))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Fatalf("token %q: HTTP %d, close %v", tok, resp.StatusCode, resp.Close)
		}
	}
}
