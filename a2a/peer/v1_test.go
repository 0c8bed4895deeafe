package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/supervisor/delegate"
)

// callLog records the JSON-RPC methods a server was called with, each with
// its A2A-Version header ("SendMessage@1.0", "message/send@").
type callLog struct {
	mu   sync.Mutex
	list []string
}

func (c *callLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &req)
			c.mu.Lock()
			c.list = append(c.list, req.Method+"@"+r.Header.Get(a2acall.VersionHeader))
			c.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (c *callLog) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.list)
}

// serveFront serves h behind agentd's own front (server.Handler: JSON-RPC
// 0.3 and 1.0, the card in both shapes) on loopback, with push
// notifications to loopback allowed, and returns its URL and the calls it
// got.
func serveFront(t *testing.T, h a2asrv.RequestHandler, instance string) (string, *callLog) {
	t.Helper()
	c := &callLog{}
	var front http.Handler
	srv := httptest.NewServer(c.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { front.ServeHTTP(w, r) })))
	t.Cleanup(srv.Close)
	front = server.Handler(server.Config{Handler: h, Card: a2abind.Card(a2abind.CardConfig{Name: "agentd", URL: srv.URL + "/", Instance: instance, MaxDepth: 4, Push: true})})
	return srv.URL, c
}

// engineOf is a task engine over exec with push notifications to loopback.
func engineOf(t *testing.T, exec a2asrv.AgentExecutor) *tasks.Engine {
	store := tasks.NewMemoryStore(100, time.Hour)
	pusher := tasks.NewPusher(tasks.PushSettings{Policy: tasks.PushPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}, store.ListPush)
	t.Cleanup(pusher.Close)
	return tasks.NewEngine(store, exec, nil, tasks.WithPusher(pusher))
}

// agentdEngine is agentd's engine and executor over remote, the provider
// every delegation it gets goes to.
func agentdEngine(t *testing.T, remote delegate.Provider) *tasks.Engine {
	router := &delegate.Router{}
	if err := router.Register(remote); err != nil {
		t.Fatal(err)
	}
	return tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), a2abind.NewExecutor(a2abind.ExecutorConfig{
		Router: router, Limits: api.Limits{MaxSteps: 50, MaxTokens: 1000, Deadline: api.Duration(time.Minute)}, Instance: "B", MaxDepth: func() int { return 4 },
		Scope: func() api.ToolScope { return api.ToolScope{Allow: []api.ToolRef{{Server: "gh", Tool: "search"}}} },
	}), nil)
}

// methods are the distinct methods of calls, in order.
func methods(cs []string) []string {
	var out []string
	for _, c := range cs {
		if c != "@" && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// An agentd peer, whose card offers 1.0 and 0.3, is called in 1.0: the
// nested-task contract (schema, scope, hops, depth, exact status and usage)
// goes through over SendMessage and SubscribeToTask or GetTask, each with
// A2A-Version: 1.0; pinned to 0.3, the same delegation goes over
// message/send.
func TestPeerAgentdOver10(t *testing.T) {
	remote := &a2atest.Provider{Caps: a2atest.FullCaps,
		Result: func(req delegate.Request) api.SubagentResult {
			return api.SubagentResult{Status: api.StatusExhaustedSteps, Distillate: api.ResultBody{Inline: json.RawMessage(`[1,2]`)}, Usage: api.Usage{TokensIn: 10, TokensOut: 20, Steps: 5}, Detail: "ran out"}
		}}
	url, got := serveFront(t, agentdEngine(t, remote), "B")
	for _, tc := range []struct {
		version string
		want    string // the send, as calls records it
	}{{"", "SendMessage@1.0"}, {"0.3", "message/send@"}} {
		t.Run("version="+tc.version, func(t *testing.T) {
			remote.Reset()
			got.mu.Lock()
			got.list = nil
			got.mu.Unlock()
			p := newPeer(t, url, func(c *Config) { c.Version = tc.version })
			req := peerRequest("structured", 30*time.Second)
			req.Handle = "h-" + tc.version
			req.Payload.Contract.OutputFormat = api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(`{"type":"array"}`)}
			req.Payload.Scope = api.ToolScope{Allow: []api.ToolRef{{Server: "gh", Tool: "search"}}}
			run, err := p.Start(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			res := runResult(t, run)
			if res.Status != api.StatusExhaustedSteps || string(res.Distillate.Inline) != "[1,2]" || res.Usage != (api.Usage{TokensIn: 10, TokensOut: 20, Steps: 5}) || !strings.Contains(res.Detail, "ran out") {
				t.Fatalf("result %+v (%s)", res, res.Distillate.Inline)
			}
			r := remote.Requests()[0]
			if string(r.Payload.Contract.OutputFormat.Schema) != `{"type":"array"}` || len(r.Payload.Scope.Allow) != 1 || strings.Join(r.Hops, ",") != "a,B" || r.Depth != 1 {
				t.Fatalf("the peer got %+v (hops %v, depth %d)", r.Payload, r.Hops, r.Depth)
			}
			m := methods(got.all())
			if len(m) < 2 || m[0] != tc.want {
				t.Fatalf("calls %v, want %s first", m, tc.want)
			}
			for _, c := range m {
				if strings.HasSuffix(c, "@1.0") != (tc.version == "") {
					t.Fatalf("calls %v mix the versions", m)
				}
			}
		})
	}
}

// A delegation cancelled while the agentd peer works: the run ends cancelled
// and the peer's task canceled, over 1.0 (CancelTask), after following it by
// SubscribeToTask.
func TestPeerCancelOver10(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	engine := agentdEngine(t, &a2atest.Provider{Caps: a2atest.FullCaps, Hold: hold, Result: a2atest.Echo})
	url, got := serveFront(t, engine, "B")
	p := newPeer(t, url, nil)
	run, err := p.Start(context.Background(), peerRequest("wait", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, a2atest.Wait, "the subscription", func() bool { return slices.Contains(got.all(), "SubscribeToTask@1.0") })
	run.Cancel("enough")
	res := runResult(t, run)
	if res.Status != api.StatusCancelled || res.Detail != "cancelled: enough" {
		t.Fatalf("result %+v", res)
	}
	if task := a2atest.WaitTerminal(t, engine, run.(*remoteRun).remote()); task.Status.State != a2a.TaskStateCanceled || task.Metadata[api.MetaStatus] != string(api.StatusCancelled) {
		t.Fatalf("the peer's task is %s (%v), want canceled", task.Status.State, task.Metadata)
	}
	if !slices.Contains(got.all(), "CancelTask@1.0") {
		t.Fatalf("calls %v: no CancelTask in 1.0", got.all())
	}
}

// A delegation's messageId is its own, not random: the same delegation sent
// twice (a crash rerun, a client's retry) makes an agentd peer, which keeps
// messageIds per caller, answer with the task it already has; the peer runs
// the work once.
func TestDelegationSentTwiceRunsOnce(t *testing.T) {
	exec := &a2atest.Executor{}
	engine := engineOf(t, exec)
	url, _ := serveFront(t, engine, "B")
	p := newPeer(t, url, nil)
	req := peerRequest("once", time.Minute)
	var ids []a2a.TaskID
	for range 2 {
		run, err := p.Start(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res := runResult(t, run); res.Status != api.StatusCompleted || res.Distillate.Text() != "echo: once" {
			t.Fatalf("result %+v", res)
		}
		ids = append(ids, run.(*remoteRun).remote())
	}
	if n := len(exec.Messages()); n != 1 || ids[0] != ids[1] {
		t.Fatalf("the peer ran the delegation %d times (tasks %v); want once, one task", n, ids)
	}
	// Another turn (a follow-up: a new objective) is another message.
	next := req
	next.Payload.Contract.Objective = "twice"
	next.Payload.Seed.Slices = append(next.Payload.Seed.Slices, api.SeedSlice{Label: "turn 1 answer"})
	run, err := p.Start(context.Background(), next)
	if err != nil {
		t.Fatal(err)
	}
	runResult(t, run)
	if n := len(exec.Messages()); n != 2 {
		t.Fatalf("the follow-up turn reached the peer %d times in all; want 2 messages", n)
	}
}

func TestMessageID(t *testing.T) {
	req := peerRequest("x", time.Minute)
	id := MessageID(req)
	if id != MessageID(req) || len(id) != 36 || id[14] != '8' {
		t.Fatalf("MessageID %q: want a stable UUID of version 8", id)
	}
	for _, change := range []func(*delegate.Request){
		func(r *delegate.Request) { r.Handle = "h2" },
		func(r *delegate.Request) { r.Payload.AgentPath = "0.2" },
		func(r *delegate.Request) { r.Payload.Contract.Objective = "y" },
		func(r *delegate.Request) { r.Payload.Seed.Slices = []api.SeedSlice{{Label: "turn 1"}} },
	} {
		r := peerRequest("x", time.Minute)
		change(&r)
		if MessageID(r) == id {
			t.Fatalf("a different delegation (%+v) got the same messageId", r)
		}
	}
}

// A peer that refuses the version it is called in (here a pinned 0.3 to a
// peer that answers as the JavaScript SDK's 1.0 server does with its 0.3
// compatibility off) ends the delegation crashed, its cause
// peer_unsupported, its detail naming what was called, what the card offers
// and the peer's own words.
func TestPeerRefusalSaysWhy(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Write([]byte(`{"name":"js","supportedInterfaces":[{"url":"` + srv.URL + `/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"streaming":true}}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":"1","error":{"code":-32009,"message":"The requested A2A protocol version '0.3' is not supported. Supported versions: 1.0"}}`))
	}))
	defer srv.Close()
	p := newPeer(t, srv.URL, func(c *Config) { c.Version, c.Binding = "0.3", "JSONRPC" })
	run, err := p.Start(context.Background(), peerRequest("x", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, run)
	for _, want := range []string{"refused A2A 0.3 over JSONRPC", "its card offers 1.0/JSONRPC", "-32009", "version '0.3' is not supported"} {
		if !strings.Contains(res.Detail, want) {
			t.Errorf("detail %q lacks %q", res.Detail, want)
		}
	}
	if res.Status != api.StatusCrashed || res.Cause != api.CausePeerUnsupported {
		t.Fatalf("result %+v: want crashed, cause %s", res, api.CausePeerUnsupported)
	}
}

// Bad pins are refused when the peer is configured, naming the setting.
func TestPeerPinsValidated(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"b=http://127.0.0.1:1/,version=2.0", `version="2.0": want one of 0.3, 1.0`},
		{"b=http://127.0.0.1:1/,binding=SOAP", `binding="SOAP": want one of JSONRPC, HTTP+JSON, GRPC`},
		{"b=http://127.0.0.1:1/,version=", `option "version=": want KEY=VALUE`},
	} {
		if _, err := ParseSpec(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSpec(%q) = %v, want %q", tc.spec, err, tc.want)
		}
	}
	c, err := ParseSpec("b=http://127.0.0.1:1/,version=1.0,binding=jsonrpc")
	if err != nil || c.Version != "1.0" || c.Binding != "JSONRPC" {
		t.Fatalf("ParseSpec: %+v, %v", c, err)
	}
	// A binding agentd does not call (yet) is refused by New.
	if _, err := New(Config{Name: "b", URL: "http://127.0.0.1:1/", Binding: "GRPC", Version: "0.3"}, nil); err == nil || !strings.Contains(err.Error(), "agentd calls no such transport") {
		if _, ok := Transports()[a2acall.Key{Version: "0.3", Binding: "GRPC"}]; !ok {
			t.Fatalf("New with an uncalled binding: %v", err)
		}
	}
}
