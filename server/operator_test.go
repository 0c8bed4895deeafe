package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// operatorHandler serves the operator methods to an operator token holder, over
// a real supervisor that never spawns (the live-tree tests run in e2e/).
func operatorHandler(t *testing.T) (*Operator, func(method, params string) rpcReply) {
	t.Helper()
	sup, err := supervisor.New(supervisor.Config{Executable: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	op := &Operator{Sup: sup, InFlight: func() int { return 3 }, Drain: NewDrainer(25*time.Second, func() { refused = true }), LameDuck: NewLameDuck()}
	tokens, err := ParseTokens([]byte(operatorToken + " operator admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(Config{Handler: nil, Card: nil, Methods: op.Methods(), Auth: &Auth{Tokens: tokens}})
	t.Cleanup(func() {
		if op.Drain.Draining() && !refused {
			t.Error("a drain began without refusing new work first")
		}
	})
	call := func(method, params string) rpcReply {
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `"`
		if params != "" {
			body += `,"params":` + params
		}
		body += "}"
		rec := newRecorderRequest(h, body, operatorToken)
		var r rpcReply
		if err := json.Unmarshal(rec, &r); err != nil {
			t.Fatalf("%s: %v (%s)", method, err, rec)
		}
		return r
	}
	return op, call
}

func TestOperatorBadParams(t *testing.T) {
	_, call := operatorHandler(t)
	for _, c := range []struct{ method, params string }{
		{api.OpDrain, `{"deadline_ms":-5}`},
		{api.OpDrain, `{"deadline_ms":"soon"}`},
		{api.OpDrain, `{"deadline":1000}`},
		{api.OpLameDuck, `{"ready":"yes"}`},
		{api.OpPause, `{"all":true}`},
		{api.OpResume, `[1]`},
		{api.OpCancel, `{"handle":7}`},
		{api.OpTree, `"x"`},
		{api.OpCaps, `{"max_depth":0}`},
		{api.OpCaps, `{"max_depth":1000}`},
		{api.OpCaps, `{"spawn_rate":-1}`},
		{api.OpCaps, `{"max_depth":3,"bogus":1}`},
	} {
		r := call(c.method, c.params)
		if r.Error == nil || r.Error.Code != CodeInvalidParams {
			t.Errorf("%s %s: %+v, want -32602", c.method, c.params, r.Error)
		}
	}
	// Nothing changed: the caps are the defaults and no drain began.
	r := call(api.OpCaps, "")
	var caps api.CapsResult
	json.Unmarshal(r.Result, &caps)
	if caps.MaxDepth != supervisor.DefaultCaps.MaxDepth {
		t.Fatalf("caps changed by bad params: %+v", caps)
	}
}

func TestOperatorCapsLameDuckDrain(t *testing.T) {
	op, call := operatorHandler(t)
	var caps api.CapsResult
	r := call(api.OpCaps, `{"max_depth":2,"spawn_rate":0.5}`)
	if r.Error != nil || json.Unmarshal(r.Result, &caps) != nil || caps.MaxDepth != 2 || caps.SpawnRate != 0.5 || caps.MaxChildren != supervisor.DefaultCaps.MaxChildren {
		t.Fatalf("caps set: %+v %+v", r.Error, caps)
	}
	if got := op.Sup.Caps(); got.MaxDepth != 2 {
		t.Fatalf("supervisor caps %+v", got)
	}

	var ld api.LameDuckResult
	r = call(api.OpLameDuck, "")
	if r.Error != nil || json.Unmarshal(r.Result, &ld) != nil || ld.Ready || ld.InFlight != 3 || op.LameDuck.Ready() {
		t.Fatalf("lame duck: %+v %+v", r.Error, ld)
	}
	since := ld.Since
	r = call(api.OpLameDuck, `{"ready":false}`)
	json.Unmarshal(r.Result, &ld)
	if !ld.Since.Equal(since) {
		t.Fatalf("a repeated LameDuck moved since from %v to %v", since, ld.Since)
	}
	r = call(api.OpLameDuck, `{"ready":true}`)
	json.Unmarshal(r.Result, &ld)
	if !ld.Ready || !op.LameDuck.Ready() || !ld.Since.After(since) {
		t.Fatalf("ready again: %+v", ld)
	}

	var d api.DrainResult
	r = call(api.OpDrain, `{"deadline_ms":5000}`)
	if r.Error != nil || json.Unmarshal(r.Result, &d) != nil || !d.Draining || d.DrainTimeoutMS != 5000 || d.ETAMS <= 0 || d.ETAMS > 5000 || d.InFlight != 3 {
		t.Fatalf("drain: %+v %+v", r.Error, d)
	}
	select {
	case <-op.Drain.Requested():
	default:
		t.Fatal("a2a.Drain did not request the drain")
	}
	// Idempotent: a second call reports the same drain, budget unchanged.
	var d2 api.DrainResult
	r = call(api.OpDrain, `{"deadline_ms":1}`)
	if r.Error != nil || json.Unmarshal(r.Result, &d2) != nil || !d2.StartedAt.Equal(d.StartedAt) || d2.DrainTimeoutMS != 5000 {
		t.Fatalf("second drain: %+v %+v", r.Error, d2)
	}

	var tr api.TreeResult
	r = call(api.OpTree, "")
	if r.Error != nil || json.Unmarshal(r.Result, &tr) != nil || tr.Nodes == nil || len(tr.Nodes) != 0 || tr.WarmPool != nil {
		t.Fatalf("empty tree: %+v %s", r.Error, r.Result)
	}
	var c api.CancelResult
	r = call(api.OpCancel, `{"handle":"no-such-task"}`)
	if r.Error != nil || json.Unmarshal(r.Result, &c) != nil || c.Cancelled || c.SubtreeSize != 0 || c.Handle != "no-such-task" {
		t.Fatalf("cancel of an unknown handle: %+v %+v", r.Error, c)
	}
}

func newRecorderRequest(h http.Handler, body, token string) []byte {
	rec := httptest.NewRecorder()
	req := newPost(strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	h.ServeHTTP(rec, req)
	return rec.Body.Bytes()
}

// a2a.Tree reports the warm pool: its size and how many children are ready,
// starting, assigned, or were missed. This pool's binary does not exist, so
// no child ever gets ready and no spawn is served.
func TestOperatorTreeWarmPool(t *testing.T) {
	sup, err := supervisor.New(supervisor.Config{Executable: "/nonexistent", WarmPool: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sup.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	tokens, err := ParseTokens([]byte(operatorToken + " operator admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	op := &Operator{Sup: sup, InFlight: func() int { return 0 }, Drain: NewDrainer(time.Second, func() {}), LameDuck: NewLameDuck()}
	h := Handler(Config{Methods: op.Methods(), Auth: &Auth{Tokens: tokens}})
	var r rpcReply
	if err := json.Unmarshal(newRecorderRequest(h, `{"jsonrpc":"2.0","id":1,"method":"a2a.Tree"}`, operatorToken), &r); err != nil {
		t.Fatal(err)
	}
	var tr api.TreeResult
	if r.Error != nil || json.Unmarshal(r.Result, &tr) != nil {
		t.Fatalf("a2a.Tree: %+v %s", r.Error, r.Result)
	}
	if tr.WarmPool == nil || tr.WarmPool.Size != 2 || tr.WarmPool.Idle != 0 || tr.WarmPool.Assigned != 0 {
		t.Fatalf("warm pool = %+v, want size 2 and nothing idle or assigned", tr.WarmPool)
	}
}
