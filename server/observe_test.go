package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/telemetry"
)

// /metrics on the main listener is for operators only; the JSON-RPC endpoint
// counts every request by a bounded method label and its code.
func TestMetricsEndpointAndRequestCounts(t *testing.T) {
	tokens, err := ParseTokens([]byte(peerToken + " peer ci\n" + operatorToken + " operator admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := telemetry.NewMetrics()
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	srv := httptest.NewServer(Handler(Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"}),
		Auth: &Auth{Tokens: tokens}, Metrics: m}))
	defer srv.Close()

	post := func(tok, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	post(peerToken, `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]}}}`)
	post(peerToken, `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"id":"nope"}}`)
	post(peerToken, `{"jsonrpc":"2.0","id":3,"method":"no/such/method-`+strings.Repeat("x", 10)+`"}`)
	post(peerToken, `{"jsonrpc":"2.0","id":4,"method":"a2a.Drain"}`) // no operator methods configured: unknown
	post(peerToken, `{not json`)
	post("", `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"id":"x"}}`)
	post(peerToken, `{"jsonrpc":"2.0","id":6,"method":"message/stream","params":{"message":{"role":"user","messageId":"m2","parts":[{"kind":"text","text":"hi"}]}}}`)

	get := func(tok string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+MetricsPath, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("anonymous scrape: %d, want 401", code)
	}
	if code, _ := get(peerToken); code != http.StatusForbidden {
		t.Errorf("peer scrape: %d, want 403", code)
	}
	code, body := get(operatorToken)
	if code != http.StatusOK || !strings.Contains(body, "agent_a2a_requests_total") {
		t.Fatalf("operator scrape: %d\n%s", code, body)
	}

	want := `
# HELP agent_a2a_requests_total A2A JSON-RPC requests served, by method (unknown for a method this service does not have, none when the request was refused before one was read) and code (ok, the JSON-RPC error code, or http_STATUS for a refusal before JSON-RPC).
# TYPE agent_a2a_requests_total counter
agent_a2a_requests_total{code="-32001",method="tasks/get"} 1
agent_a2a_requests_total{code="-32601",method="unknown"} 2
agent_a2a_requests_total{code="-32700",method="none"} 1
agent_a2a_requests_total{code="http_401",method="none"} 1
agent_a2a_requests_total{code="ok",method="message/send"} 1
agent_a2a_requests_total{code="ok",method="message/stream"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), telemetry.MetricA2ARequests); err != nil {
		t.Fatal(err)
	}
}
