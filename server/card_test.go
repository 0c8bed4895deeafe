package server

import (
	"encoding/json"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
)

// TestCardFuncServesTheCurrentCard: with CardFunc, each request gets the
// card it returns now (a SIGHUP-reloaded agents file), encoded as the static
// card is, supportedInterfaces included.
func TestCardFuncServesTheCurrentCard(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), doneExec{}, nil)
	first := a2abind.Card(a2abind.CardConfig{Name: "first", URL: "http://x/"})
	var cur atomic.Pointer[a2a.AgentCard]
	cur.Store(first)
	dynamic := Handler(Config{Handler: engine, Card: first, CardFunc: cur.Load})
	static := Handler(Config{Handler: engine, Card: first})
	serve := func(card string) string {
		rec := httptest.NewRecorder()
		if card == "static" {
			static.ServeHTTP(rec, httptest.NewRequest("GET", "/.well-known/agent-card.json", nil))
		} else {
			dynamic.ServeHTTP(rec, httptest.NewRequest("GET", "/.well-known/agent-card.json", nil))
		}
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("HTTP %d %q", rec.Code, rec.Header().Get("Content-Type"))
		}
		return rec.Body.String()
	}
	if d, s := serve("dynamic"), serve("static"); d != s {
		t.Fatalf("the same card served differently:\n%s\n%s", d, s)
	}
	cur.Store(a2abind.Card(a2abind.CardConfig{Name: "second", URL: "http://x/"}))
	for range 2 {
		var card a2a.AgentCard
		body := serve("dynamic")
		if err := json.Unmarshal([]byte(body), &card); err != nil {
			t.Fatal(err)
		}
		if card.Name != "second" {
			t.Fatalf("after the swap: %s", body)
		}
	}
}
