package server

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor"
)

// Every a2a.* call leaves one audit record (LogOperatorCall) with the method,
// the caller and the outcome (issue 29.13: an operator's call left no line
// naming the caller): an operator's call that succeeds, one that fails on its
// params (with the JSON-RPC code), and a peer's call that is refused, over a
// real loopback listener.
func TestOperatorCallsAreAudited(t *testing.T) {
	sup, err := supervisor.New(supervisor.Config{Executable: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	op := &Operator{Sup: sup, Drain: NewDrainer(time.Second, nil), LameDuck: NewLameDuck()}
	tokens, err := ParseTokens([]byte(operatorToken + " operator admin\n" + peerToken + " peer ci\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	srv := httptest.NewServer(Handler(Config{Methods: op.Methods(), Auth: &Auth{Tokens: tokens, Log: log}, Log: log}))
	defer srv.Close()
	call := func(tok, method, params string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	call(operatorToken, api.OpTree, `{}`)
	call(operatorToken, api.OpCaps, `{"max_depth":"deep"}`)
	call(peerToken, api.OpPause, `{}`)

	type record struct {
		Level, Msg, Method, Outcome, Params string
		SpiffeID                            string `json:"spiffe_id"`
		CallerAuth                          string `json:"caller_auth"`
		Role                                string
		Code                                *int
		Err                                 string
	}
	var got []record
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Msg == LogOperatorCall {
			got = append(got, r)
		}
	}
	if len(got) != 3 {
		t.Fatalf("%d audit records, want 3:\n%s", len(got), logs.String())
	}
	want := []struct {
		level, method, caller, role, outcome string
		code                                 int
	}{
		{"INFO", api.OpTree, "token:admin", "operator", "ok", 0},
		{"INFO", api.OpCaps, "token:admin", "operator", "error", CodeInvalidParams},
		{"WARN", api.OpPause, "token:ci", "peer", "refused", CodeMethodNotFound},
	}
	for i, w := range want {
		r := got[i]
		if r.Level != w.level || r.Method != w.method || r.SpiffeID != w.caller || r.CallerAuth != AuthToken || r.Role != w.role || r.Outcome != w.outcome {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
		if (w.code == 0) != (r.Code == nil) || (r.Code != nil && *r.Code != w.code) || (w.code != 0 && r.Err == "") {
			t.Errorf("record %d: code %v err %q, want code %d", i, r.Code, r.Err, w.code)
		}
	}
	if got[1].Params != `{"max_depth":"deep"}` {
		t.Errorf("the params quoted: %q", got[1].Params)
	}
}
