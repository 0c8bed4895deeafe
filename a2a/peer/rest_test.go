package peer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/supervisor/delegate"
)

// pathLog records the method and path of each request a front gets.
type pathLog struct {
	mu   sync.Mutex
	list []string
}

func (l *pathLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, s)
}

func (l *pathLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// serveFrontPaths serves h behind agentd's own front, as serveFront does,
// recording each request's method and path.
func serveFrontPaths(t *testing.T, h a2asrv.RequestHandler, instance string) (string, *pathLog) {
	t.Helper()
	log := &pathLog{}
	var front http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r.Method + " " + r.URL.Path)
		front.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	front = server.Handler(server.Config{Handler: h, Card: a2abind.Card(a2abind.CardConfig{Name: "agentd", URL: srv.URL + "/", Instance: instance, MaxDepth: 4, Push: true})})
	return srv.URL, log
}

// An agentd peer pinned to HTTP+JSON (binding=HTTP+JSON) is called over
// its routes: the nested-task contract (schema, hops, depth, exact status
// and usage) goes through POST /message:send and the task's subscription,
// and a cancel is POST /tasks/{id}:cancel; nothing goes to the JSON-RPC
// endpoint.
func TestPeerAgentdOverHTTPJSON(t *testing.T) {
	remote := &a2atest.Provider{Caps: a2atest.FullCaps,
		Result: func(delegate.Request) api.SubagentResult {
			return api.SubagentResult{Status: api.StatusExhaustedSteps, Distillate: api.ResultBody{Inline: json.RawMessage(`[1,2]`)}, Usage: api.Usage{TokensIn: 10, TokensOut: 20, Steps: 5}, Detail: "ran out"}
		}}
	url, got := serveFrontPaths(t, agentdEngine(t, remote), "B")
	p := newPeer(t, url, func(c *Config) { c.Binding = "HTTP+JSON" })
	req := peerRequest("structured", 30*time.Second)
	req.Payload.Contract.OutputFormat = api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(`{"type":"array"}`)}
	run, err := p.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, run)
	if res.Status != api.StatusExhaustedSteps || string(res.Distillate.Inline) != "[1,2]" || res.Usage != (api.Usage{TokensIn: 10, TokensOut: 20, Steps: 5}) || !strings.Contains(res.Detail, "ran out") {
		t.Fatalf("result %+v (%s)", res, res.Distillate.Inline)
	}
	r := remote.Requests()[0]
	if string(r.Payload.Contract.OutputFormat.Schema) != `{"type":"array"}` || strings.Join(r.Hops, ",") != "a,B" || r.Depth != 1 {
		t.Fatalf("the peer got %+v (hops %v, depth %d)", r.Payload, r.Hops, r.Depth)
	}
	paths := got.all()
	if !slices.Contains(paths, "POST /message:send") || slices.Contains(paths, "POST /") {
		t.Fatalf("requests %v: want POST /message:send and no JSON-RPC", paths)
	}

	hold := make(chan struct{})
	defer close(hold)
	engine := agentdEngine(t, &a2atest.Provider{Caps: a2atest.FullCaps, Hold: hold, Result: a2atest.Echo})
	url, got = serveFrontPaths(t, engine, "B")
	p = newPeer(t, url, func(c *Config) { c.Binding = "HTTP+JSON" })
	run, err = p.Start(context.Background(), peerRequest("wait", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, a2atest.Wait, "the subscription", func() bool {
		return slices.ContainsFunc(got.all(), func(s string) bool { return strings.HasSuffix(s, ":subscribe") })
	})
	run.Cancel("enough")
	res = runResult(t, run)
	if res.Status != api.StatusCancelled || res.Detail != "cancelled: enough" {
		t.Fatalf("result %+v", res)
	}
	id := run.(*remoteRun).remote()
	if task := a2atest.WaitTerminal(t, engine, id); task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("the peer's task is %s, want canceled", task.Status.State)
	}
	if !slices.Contains(got.all(), "POST /tasks/"+string(id)+":cancel") {
		t.Fatalf("requests %v: no cancel route", got.all())
	}
}

// A peer whose card offers HTTP+JSON but whose routes are not there (404
// with no A2A error) refuses the binding: the delegation ends crashed with
// cause peer_unsupported, naming what was called.
func TestPeerHTTPJSONRefusalSaysWhy(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/agent-card.json" {
			w.Write([]byte(`{"name":"x","supportedInterfaces":[{"url":"` + srv.URL + `","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}],"capabilities":{"streaming":true}}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	p := newPeer(t, srv.URL, nil)
	run, err := p.Start(context.Background(), peerRequest("x", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, run)
	if res.Status != api.StatusCrashed || res.Cause != api.CausePeerUnsupported || !strings.Contains(res.Detail, "HTTP+JSON") {
		t.Fatalf("result %+v: want crashed, cause %s, naming HTTP+JSON", res, api.CausePeerUnsupported)
	}
}
