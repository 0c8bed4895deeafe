package peer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor/delegate"
)

func newPeer(t *testing.T, url string, mutate func(*Config)) *Provider {
	t.Helper()
	cfg := Config{Name: "b", URL: url, Timeout: 5 * time.Second}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func peerRequest(objective string, deadline time.Duration) delegate.Request {
	return delegate.Request{
		Handle: "h1",
		Payload: api.SpawnPayload{
			Contract: api.OutputContract{Objective: objective, OutputFormat: api.OutputFormat{Kind: api.FormatText}},
			Limits:   api.Limits{MaxSteps: 5, MaxTokens: 100, Deadline: api.Duration(deadline)},
		},
		Hops:     []string{"a"},
		MaxDepth: 4,
	}
}

func runResult(t *testing.T, run delegate.Run) api.SubagentResult {
	t.Helper()
	select {
	case <-run.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the peer run did not end within 10s")
	}
	return run.Result()
}

// A stock a2a-go server is a peer with no capabilities: a plain request goes
// through (the objective as text, the mesh data as metadata, no data part); a
// capability-needing one is refused before anything is sent.
func TestPeerPlainA2AServer(t *testing.T) {
	exec := &a2atest.Executor{}
	url := a2atest.Serve(t, a2asrv.NewHandler(exec), a2atest.Card, nil)
	p := newPeer(t, url, nil)
	router := &delegate.Router{}
	router.Register(p)

	needs := peerRequest("x", time.Minute)
	needs.Provider = p.Name()
	needs.Payload.Scope = api.ToolScope{Allow: []api.ToolRef{{Server: "s", Tool: "t"}}}
	if _, err := router.Start(context.Background(), needs); !errors.Is(err, delegate.ErrUnsupportedCapability) {
		t.Fatalf("capability request to a plain peer: %v", err)
	}
	if p.Capabilities() != (delegate.Capabilities{}) {
		t.Fatalf("a plain peer has capabilities %+v", p.Capabilities())
	}

	req := peerRequest("hello peer", time.Minute)
	req.Provider = p.Name()
	run, err := router.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, run)
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "echo: hello peer" {
		t.Fatalf("result: %+v %q", res, res.Distillate.Text())
	}
	m := exec.Messages()[0]
	if len(m.Parts) != 1 || m.Metadata[api.MetaDepth] != float64(1) || m.Metadata[api.MetaHops].([]any)[0] != "a" {
		t.Fatalf("message to a plain peer: parts %v, metadata %v", m.Parts, m.Metadata)
	}
}

// A peer that outlives the delegation's deadline: the run ends deadline and
// the peer sees tasks/cancel.
func TestPeerDeadlineCancelsTheRemoteTask(t *testing.T) {
	exec := &a2atest.Executor{Block: true}
	canceled := exec.Canceled()
	url := a2atest.Serve(t, a2asrv.NewHandler(exec), a2atest.Card, nil)
	p := newPeer(t, url, nil)
	run, err := p.Start(context.Background(), peerRequest("wait forever", 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, run)
	if res.Status != api.StatusDeadline {
		t.Fatalf("status %s (%s), want deadline", res.Status, res.Detail)
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the peer never saw tasks/cancel")
	}
}

func TestPeerCancel(t *testing.T) {
	exec := &a2atest.Executor{Block: true}
	canceled := exec.Canceled()
	url := a2atest.Serve(t, a2asrv.NewHandler(exec), a2atest.Card, nil)
	p := newPeer(t, url, nil)
	run, err := p.Start(context.Background(), peerRequest("wait", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, a2atest.Wait, "the message at the peer", func() bool { return len(exec.Messages()) == 1 })
	run.Cancel("operator said so")
	res := runResult(t, run)
	if res.Status != api.StatusCancelled || !strings.Contains(res.Detail, "operator said so") {
		t.Fatalf("result %+v", res)
	}
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the peer never saw tasks/cancel")
	}
}

// An agentd peer (the engine and executor behind a JSON-RPC front, with the
// contract extension in its card) gets the full delegation, and its exact
// status and usage come back.
func TestPeerAgentd(t *testing.T) {
	remote := &a2atest.Provider{Caps: a2atest.FullCaps,
		Result: func(req delegate.Request) api.SubagentResult {
			return api.SubagentResult{Status: api.StatusExhaustedSteps, Distillate: api.ResultBody{Inline: json.RawMessage(`[1,2]`)}, Usage: api.Usage{TokensIn: 10, TokensOut: 20, Steps: 5}, Detail: "ran out"}
		}}
	router := &delegate.Router{}
	if err := router.Register(remote); err != nil {
		t.Fatal(err)
	}
	engine := tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), a2abind.NewExecutor(a2abind.ExecutorConfig{
		Router: router, Limits: api.Limits{MaxSteps: 50, MaxTokens: 1000, Deadline: api.Duration(time.Minute)}, Instance: "B", MaxDepth: func() int { return 4 },
		Scope: func() api.ToolScope {
			return api.ToolScope{Allow: []api.ToolRef{{Server: "gh", Tool: "search"}, {Server: "gh", Tool: "read"}}}
		},
	}), nil)
	url := a2atest.Serve(t, engine, func(url string) *a2a.AgentCard {
		return a2abind.Card(a2abind.CardConfig{Name: "agentd", URL: url, Instance: "B", MaxDepth: 4})
	}, nil)
	p := newPeer(t, url, nil)
	if err := p.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.Capabilities() != (delegate.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}) {
		t.Fatalf("caps %+v", p.Capabilities())
	}
	req := peerRequest("structured", 30*time.Second)
	req.Payload.Contract.OutputFormat = api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(`{"type":"array"}`)}
	req.Payload.Scope = api.ToolScope{Allow: []api.ToolRef{{Server: "gh", Tool: "search"}}}
	run, err := p.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, run)
	if res.Status != api.StatusExhaustedSteps || string(res.Distillate.Inline) != "[1,2]" || res.Usage != (api.Usage{TokensIn: 10, TokensOut: 20, Steps: 5}) {
		t.Fatalf("result %+v (%s)", res, res.Distillate.Inline)
	}
	got := remote.Requests()[0]
	if string(got.Payload.Contract.OutputFormat.Schema) != `{"type":"array"}` || len(got.Payload.Scope.Allow) != 1 {
		t.Fatalf("the peer got %+v", got.Payload)
	}
	if d := got.Payload.Limits.Deadline.D(); d != 30*time.Second+DeadlineGrace {
		t.Fatalf("the peer was given %s; want the deadline plus the grace (this side cancels first)", d)
	}
	if strings.Join(got.Hops, ",") != "a,B" || got.Depth != 1 {
		t.Fatalf("the peer's mesh view: hops %v depth %d", got.Hops, got.Depth)
	}

	// B is on the path already: refused before sending.
	cyc := peerRequest("again", time.Minute)
	cyc.Hops = []string{"B", "a"}
	if _, err := p.Start(context.Background(), cyc); !errors.Is(err, a2abind.ErrCycle) {
		t.Fatalf("cycle: %v", err)
	}
	deep := peerRequest("deep", time.Minute)
	deep.Depth = 4 // the peer would sit at 5, past the cap of 4
	if _, err := p.Start(context.Background(), deep); !errors.Is(err, a2abind.ErrDepthExhausted) {
		t.Fatalf("depth: %v", err)
	}
	if n := len(remote.Requests()); n != 1 {
		t.Fatalf("the peer got %d requests, want 1", n)
	}
}

func TestPeerBearerToken(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokFile, []byte("s3cret\n"), 0o600)
	var mu sync.Mutex
	var seen []string
	url := a2atest.Serve(t, a2asrv.NewHandler(&a2atest.Executor{}), a2atest.Card, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Get("Authorization"))
			mu.Unlock()
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	p := newPeer(t, url, func(c *Config) { c.BearerTokenFile = tokFile })
	run, err := p.Start(context.Background(), peerRequest("hi", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if res := runResult(t, run); res.Status != api.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("%d requests", len(seen))
	}
	for _, h := range seen {
		if h != "Bearer s3cret" {
			t.Fatalf("a request went out with Authorization %q", h)
		}
	}
}

func TestPeerUnreachableIsAResult(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p := newPeer(t, url, func(c *Config) { c.Timeout = time.Second })
	if _, err := p.Start(context.Background(), peerRequest("x", time.Minute)); err == nil {
		t.Fatal("started on a peer whose card cannot be read")
	}
}

func TestDefaultClientKeepsConnections(t *testing.T) {
	c, err := DefaultClient(Config{Name: "b", URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 0 {
		t.Fatalf("a total timeout of %s would cut streams", c.Timeout)
	}
	tr := c.Transport.(*http.Transport)
	if tr.MaxIdleConnsPerHost <= 2 {
		t.Fatalf("MaxIdleConnsPerHost = %d", tr.MaxIdleConnsPerHost)
	}
	if _, err := DefaultClient(Config{Name: "b", URL: "https://x", SPIFFEID: "spiffe://td/b"}); err == nil {
		t.Fatal("a SPIFFE ID was accepted without mTLS")
	}
}

func TestParseSpec(t *testing.T) {
	c, err := ParseSpec("b=https://b.example:8443/,spiffe=spiffe://td/ns/b,token-file=/run/tok,timeout=5s")
	if err != nil || c.Name != "b" || c.SPIFFEID != "spiffe://td/ns/b" || c.BearerTokenFile != "/run/tok" || c.Timeout != 5*time.Second {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{
		"", "b", "=http://127.0.0.1:1", "b=ftp://x", "b=http://10.0.0.1:80", "b=https://x,spiffe=td/b",
		"b=https://x,timeout=-1s", "b=https://x,bogus=1", "b=https://x,timeout=1s,timeout=2s", "b c=https://x", "b=https://x,token-file",
	} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseSpec: never a panic; an accepted spec validates.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"b=http://127.0.0.1:8080", "b=https://b:8443/,spiffe=spiffe://td/b,timeout=2s", "x=https://h,token-file=/t", "=,,=", "b=http://[::1]:1/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseSpec(s)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted %q but it does not validate: %v", s, err)
		}
	})
}

// askExec is a plain A2A agent that stops to ask for more input.
type askExec struct{ a2atest.Executor }

func (a *askExec) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if err := q.Write(ctx, a2a.NewSubmittedTask(reqCtx, reqCtx.Message)); err != nil {
		return err
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateInputRequired, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: "which repository?"}))
	ev.Final = true
	return q.Write(ctx, ev)
}

// A peer that stops to ask for input cannot be answered by a delegation: the
// run ends refused with the peer's question at once (not when its deadline
// passes), and the remote task, which nobody will answer, is cancelled.
func TestPeerAskingForInputIsRefused(t *testing.T) {
	for _, streaming := range []bool{true, false} {
		exec := &askExec{}
		canceled := exec.Canceled()
		url := a2atest.Serve(t, a2asrv.NewHandler(exec), func(url string) *a2a.AgentCard {
			c := a2atest.Card(url)
			c.Capabilities.Streaming = streaming
			return c
		}, nil)
		run, err := newPeer(t, url, nil).Start(context.Background(), peerRequest("fix the bug", time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		res := runResult(t, run)
		if res.Status != api.StatusRefused || res.Detail != "which repository?" {
			t.Fatalf("streaming %v: result %+v", streaming, res)
		}
		select {
		case <-canceled:
		case <-time.After(5 * time.Second):
			t.Fatalf("streaming %v: the waiting remote task was never cancelled", streaming)
		}
	}
}

// The bearer token goes to the configured peer only: a redirect to another
// host (here, for the agent card) is followed without it.
func TestPeerBearerTokenStaysWithThePeer(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokFile, []byte("s3cret\n"), 0o600)
	var mu sync.Mutex
	var elsewhere []string
	var peerURL string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a2atest.Card(peerURL + "/"))
	}))
	defer other.Close()
	peerURL = a2atest.Serve(t, a2asrv.NewHandler(&a2atest.Executor{}), a2atest.Card, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == a2asrv.WellKnownAgentCardPath {
				http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
				return
			}
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	p := newPeer(t, peerURL, func(c *Config) { c.BearerTokenFile = tokFile })
	run, err := p.Start(context.Background(), peerRequest("hi", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if res := runResult(t, run); res.Status != api.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) != 1 || elsewhere[0] != "" {
		t.Fatalf("the other host got Authorization %q", elsewhere)
	}
}
