package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"google.golang.org/grpc/codes"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/supervisor/delegate"
)

// wireLog records each request a front gets as "BINDING what": "GRPC
// /lf.a2a.v1.A2AService/SendMessage", "HTTP+JSON POST /message:send",
// "JSONRPC SendMessage@1.0".
type wireLog struct {
	mu   sync.Mutex
	list []string
}

func (l *wireLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, s)
}

func (l *wireLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// has reports whether a request of binding whose record ends in suffix came.
func (l *wireLog) has(binding, suffix string) bool {
	return slices.ContainsFunc(l.all(), func(s string) bool { return strings.HasPrefix(s, binding+" ") && strings.HasSuffix(s, suffix) })
}

// serveAllBindings serves h behind agentd's front on a loopback listener
// speaking HTTP/1.1 and h2c (server.PlainProtocols, as agentd's development
// listener does), so the card's four interfaces (JSON-RPC 1.0 and 0.3,
// HTTP+JSON, gRPC at host:port) are all served; it returns the URL and the
// requests' log.
func serveAllBindings(t *testing.T, h a2asrv.RequestHandler, instance string) (string, *wireLog) {
	t.Helper()
	return serveAllBindingsCard(t, h, instance, nil)
}

// serveAllBindingsCard is serveAllBindings with the card card(url) serves
// instead of agentd's, when card is not nil.
func serveAllBindingsCard(t *testing.T, h a2asrv.RequestHandler, instance string, card func(url string) string) (string, *wireLog) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	front := server.Handler(server.Config{Handler: h, Card: a2abind.Card(a2abind.CardConfig{Name: "agentd", URL: url + "/", Instance: instance, MaxDepth: 4, Push: true})})
	wl := &wireLog{}
	srv := &http.Server{Protocols: server.PlainProtocols(ln.Addr()), ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case card != nil && r.URL.Path == "/.well-known/agent-card.json":
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, card(url))
				return
			case strings.HasPrefix(r.Header.Get("Content-Type"), server.GRPCContentType):
				wl.add("GRPC " + r.URL.Path)
			case r.Method == http.MethodPost && (r.URL.Path == "/" || r.URL.Path == ""):
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				var req struct {
					Method string `json:"method"`
				}
				_ = json.Unmarshal(body, &req)
				wl.add("JSONRPC " + req.Method + "@" + r.Header.Get(a2acall.VersionHeader))
			default:
				wl.add("HTTP+JSON " + r.Method + " " + r.URL.Path)
			}
			front.ServeHTTP(w, r)
		})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return url, wl
}

// agentdPushEngine is agentdEngine with push notifications to loopback.
func agentdPushEngine(t *testing.T, remote delegate.Provider) *tasks.Engine {
	router := &delegate.Router{}
	if err := router.Register(remote); err != nil {
		t.Fatal(err)
	}
	store := tasks.NewMemoryStore(10, time.Hour)
	pusher := tasks.NewPusher(tasks.PushSettings{Policy: tasks.PushPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}, store.ListPush)
	t.Cleanup(pusher.Close)
	return tasks.NewEngine(store, a2abind.NewExecutor(a2abind.ExecutorConfig{
		Router: router, Limits: api.Limits{MaxSteps: 50, MaxTokens: 1000, Deadline: api.Duration(time.Minute)}, Instance: "B", MaxDepth: func() int { return 4 },
		Scope: func() api.ToolScope { return api.ToolScope{Allow: []api.ToolRef{{Server: "gh", Tool: "search"}}} },
	}), nil, tasks.WithPusher(pusher))
}

// bindingCases are the transports a peer is called over, each pinned as an
// operator would (version=, binding=), with the log record of its send and
// of its stream (the run's subscription) and cancel.
var bindingCases = []struct {
	name, version, binding  string
	wire                    string // the wireLog binding
	send, subscribe, cancel string // suffixes of the records
}{
	{"jsonrpc-1.0", "1.0", "JSONRPC", "JSONRPC", "SendMessage@1.0", "SubscribeToTask@1.0", "CancelTask@1.0"},
	{"jsonrpc-0.3", "0.3", "JSONRPC", "JSONRPC", "message/send@", "tasks/resubscribe@", "tasks/cancel@"},
	{"http+json", "1.0", "HTTP+JSON", "HTTP+JSON", "POST /message:send", ":subscribe", ":cancel"},
	{"grpc", "1.0", "GRPC", "GRPC", "/SendMessage", "/SubscribeToTask", "/CancelTask"},
}

// An agentd peer over each transport it serves, pinned: the nested-task
// contract (schema, hops, depth, exact status, usage and detail) round-trips,
// the run follows the remote task by its stream (resubscribe), a cancel
// reaches the peer's task, and the transport's push config calls set, read,
// list and delete a config on the peer's task; every request of the
// delegation is of the pinned binding.
func TestPeerAgentdOverEachBinding(t *testing.T) {
	for _, tc := range bindingCases {
		t.Run(tc.name, func(t *testing.T) {
			remote := &a2atest.Provider{Caps: a2atest.FullCaps,
				Result: func(delegate.Request) api.SubagentResult {
					return api.SubagentResult{Status: api.StatusExhaustedSteps, Distillate: api.ResultBody{Inline: json.RawMessage(`[1,2]`)}, Usage: api.Usage{TokensIn: 10, TokensOut: 20, Steps: 5}, Detail: "ran out"}
				}}
			url, wl := serveAllBindings(t, agentdPushEngine(t, remote), "B")
			p := newPeer(t, url, func(c *Config) { c.Version, c.Binding = tc.version, tc.binding })
			defer p.Close()
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
			if !wl.has(tc.wire, tc.send) {
				t.Fatalf("requests %v: no %s %s", wl.all(), tc.wire, tc.send)
			}

			hold := make(chan struct{})
			defer close(hold)
			engine := agentdPushEngine(t, &a2atest.Provider{Caps: a2atest.FullCaps, Hold: hold, Result: a2atest.Echo})
			url, wl = serveAllBindings(t, engine, "B")
			p = newPeer(t, url, func(c *Config) { c.Version, c.Binding = tc.version, tc.binding })
			defer p.Close()
			run, err = p.Start(context.Background(), peerRequest("wait", time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, a2atest.Wait, "the subscription", func() bool { return wl.has(tc.wire, tc.subscribe) })
			id := run.(*remoteRun).remote()

			// Push configs on the peer's (working) task, over the same
			// transport.
			h, _, _, _, err := p.state()
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			cfg := &a2a.TaskPushConfig{TaskID: id, Config: a2a.PushConfig{ID: "hook-1", URL: "http://127.0.0.1:9/hook", Token: "tok"}}
			if set, err := h.t.SetTaskPushConfig(ctx, cfg); err != nil || set.Config.URL != cfg.Config.URL {
				t.Fatalf("SetTaskPushConfig: %+v %v", set, err)
			}
			if got, err := h.t.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: id, ConfigID: "hook-1"}); err != nil || got.Config.URL != cfg.Config.URL {
				t.Fatalf("GetTaskPushConfig: %+v %v", got, err)
			}
			if l, err := h.t.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: id}); err != nil || len(l) != 1 || l[0].Config.ID != "hook-1" {
				t.Fatalf("ListTaskPushConfig: %+v %v", l, err)
			}
			if err := h.t.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigParams{TaskID: id, ConfigID: "hook-1"}); err != nil {
				t.Fatalf("DeleteTaskPushConfig: %v", err)
			}
			if l, err := h.t.ListTaskPushConfig(ctx, &a2a.ListTaskPushConfigParams{TaskID: id}); err != nil || len(l) != 0 {
				t.Fatalf("ListTaskPushConfig after the delete: %+v %v", l, err)
			}
			p.release(h, false)

			run.Cancel("enough")
			res = runResult(t, run)
			if res.Status != api.StatusCancelled || res.Detail != "cancelled: enough" {
				t.Fatalf("result %+v", res)
			}
			if task := a2atest.WaitTerminal(t, engine, id); task.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("the peer's task is %s, want canceled", task.Status.State)
			}
			if !wl.has(tc.wire, tc.cancel) {
				t.Fatalf("requests %v: no %s %s", wl.all(), tc.wire, tc.cancel)
			}
			for _, s := range wl.all() {
				if !strings.HasPrefix(s, tc.wire+" ") && !strings.HasSuffix(s, "/.well-known/agent-card.json") {
					t.Fatalf("request %q of another binding than %s (all: %v)", s, tc.wire, wl.all())
				}
			}
		})
	}
}

// A card that lists gRPC first is called over gRPC, unpinned, at its
// host:port; a card whose gRPC interface names another host is called at
// the configured URL's host and port instead: a card cannot send calls (and
// credentials) elsewhere.
func TestPeerGRPCFirstInTheCard(t *testing.T) {
	for _, tc := range []struct{ name, grpcURL string }{
		{"its own host", ""},
		{"another host", "192.0.2.1:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			engine := agentdPushEngine(t, &a2atest.Provider{Caps: a2atest.FullCaps, Result: a2atest.Echo})
			url, wl := serveAllBindingsCard(t, engine, "B", func(url string) string {
				g := tc.grpcURL
				if g == "" {
					g = strings.TrimPrefix(url, "http://")
				}
				return `{"name":"b","supportedInterfaces":[{"url":"` + g + `","protocolBinding":"GRPC","protocolVersion":"1.0"},` +
					`{"url":"` + url + `/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"streaming":true}}`
			})
			p := newPeer(t, url, nil)
			defer p.Close()
			run, err := p.Start(context.Background(), peerRequest("hello grpc", 30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if res := runResult(t, run); res.Status != api.StatusCompleted || res.Distillate.Text() != "answer: hello grpc" {
				t.Fatalf("result %+v", res)
			}
			h, in, _, _, _ := p.state()
			p.release(h, false)
			if in.Binding != "GRPC" || in.URL != url {
				t.Fatalf("called %+v, want GRPC at %s", in, url)
			}
			if !wl.has("GRPC", "/SendMessage") || wl.has("JSONRPC", "") {
				t.Fatalf("requests %v: want SendMessage over gRPC, no JSON-RPC", wl.all())
			}
		})
	}
}

// A gRPC interface (host:port) is on the configured origin when its host is
// the configured URL's, on any port; it is then called with that URL's
// scheme (TLS for https), else at the configured URL.
func TestEndpointGRPC(t *testing.T) {
	for _, tc := range []struct{ cfg, iface, want string }{
		{"https://b.example:8443/a2a/", "b.example:8443", "https://b.example:8443"},
		{"https://b.example/", "b.example:443", "https://b.example:443"},
		{"http://127.0.0.1:8080/", "127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"https://b.example:8443/a2a/", "evil.example:8443", "https://b.example:8443/a2a/"},
		{"https://b.example:8443/", "b.example:9000", "https://b.example:9000"},
		{"http://127.0.0.1:8080/", "[::1]:8080", "http://127.0.0.1:8080/"},
		{"https://b.example:8443/", "b.example.evil:8443", "https://b.example:8443/"},
		{"https://b.example:8443/", "https://b.example:8443/", "https://b.example:8443"},
		{"https://b.example:8443/", "not a target", "https://b.example:8443/"},
	} {
		p := &Provider{cfg: Config{URL: tc.cfg}}
		if got := p.endpoint(Interface{URL: tc.iface, Binding: "GRPC", Version: "1.0"}); got != tc.want {
			t.Errorf("endpoint(%s) under %s = %q, want %q", tc.iface, tc.cfg, got, tc.want)
		}
	}
}

// A remote task's artifact updates reach the request's OnText as the
// child's text: a piece that starts the artifact over is a new step, an
// appended one the same step; the whole artifact at once (the answer when
// the task ends) and another task's text (an agentd peer's grandchild) are
// not shown; nothing but artifact updates is.
func TestRemoteRunText(t *testing.T) {
	type got struct {
		step int
		text string
	}
	var seen []got
	r := &remoteRun{onText: func(step int, text string) { seen = append(seen, got{step, text}) }}
	art := func(s string) *a2a.Artifact {
		return &a2a.Artifact{ID: "t.distillate", Parts: a2a.ContentParts{a2a.TextPart{Text: s}}}
	}
	for _, ev := range []a2a.Event{
		&a2a.TaskStatusUpdateEvent{Status: a2a.TaskStatus{State: a2a.TaskStateWorking}},
		&a2a.TaskArtifactUpdateEvent{Artifact: art("one ")},
		&a2a.TaskArtifactUpdateEvent{Artifact: art("two"), Append: true},
		&a2a.TaskArtifactUpdateEvent{Artifact: art("grandchild"), Append: true, Metadata: map[string]any{api.MetaStreamTask: "x"}},
		&a2a.TaskArtifactUpdateEvent{Artifact: art("again")},
		&a2a.TaskArtifactUpdateEvent{Artifact: art(""), Append: true, LastChunk: true},
		&a2a.TaskArtifactUpdateEvent{Artifact: art("one two again"), LastChunk: true},
	} {
		r.text(ev)
	}
	want := []got{{1, "one "}, {1, "two"}, {2, "again"}}
	if !slices.Equal(seen, want) {
		t.Fatalf("OnText got %v, want %v", seen, want)
	}
}

// A gRPC peer's refusal of the version (VERSION_NOT_SUPPORTED in its
// ErrorInfo) or of the method (UNIMPLEMENTED) is a refusal; its other
// errors are not.
func TestRefusedGRPC(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&a2agrpc.Error{Method: "SendMessage", Code: codes.Unimplemented, Reason: "VERSION_NOT_SUPPORTED", Domain: "a2a-protocol.org"}, true},
		{&a2agrpc.Error{Method: "SendMessage", Code: codes.Unimplemented}, true},
		{&a2agrpc.Error{Method: "SendMessage", Code: codes.Unavailable}, false},
		{&a2agrpc.Error{Method: "GetTask", Code: codes.NotFound, Reason: "TASK_NOT_FOUND", Domain: "a2a-protocol.org"}, false},
	} {
		if got := refused(fmt.Errorf("send: %w", tc.err)); got != tc.want {
			t.Errorf("refused(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// countingCloser is a transport that counts its Close calls.
type countingCloser struct {
	a2acall.Transport
	mu     sync.Mutex
	closed int
}

func (c *countingCloser) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed++
	return nil
}

func (c *countingCloser) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// A transport that holds resources (an io.Closer, as a2agrpc's client) is
// closed once the provider no longer calls it: when the card moves the calls
// to another binding, after the last delegation using it ends (not under
// it), and at Close; each exactly once.
func TestProviderClosesReplacedTransports(t *testing.T) {
	hold := make(chan struct{})
	engine := agentdPushEngine(t, &a2atest.Provider{Caps: a2atest.FullCaps, Hold: hold, Result: a2atest.Echo})
	var mu sync.Mutex
	first := "JSONRPC"
	url, _ := serveAllBindingsCard(t, engine, "B", func(url string) string {
		mu.Lock()
		defer mu.Unlock()
		jsonrpc := `{"url":"` + url + `/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}`
		rest := `{"url":"` + url + `","protocolBinding":"HTTP+JSON","protocolVersion":"1.0"}`
		if first != "JSONRPC" {
			jsonrpc, rest = rest, jsonrpc
		}
		return `{"name":"b","supportedInterfaces":[` + jsonrpc + `,` + rest + `],"capabilities":{"streaming":true}}`
	})
	p := newPeer(t, url, nil)
	var built []*countingCloser
	for _, k := range []a2acall.Key{{Version: "1.0", Binding: "JSONRPC"}, {Version: "1.0", Binding: "HTTP+JSON"}} {
		next := p.reg[k]
		p.reg[k] = func(u string, hc *http.Client, o a2acall.Options) (a2acall.Transport, error) {
			tr, err := next(u, hc, o)
			c := &countingCloser{Transport: tr}
			mu.Lock()
			built = append(built, c)
			mu.Unlock()
			return c, err
		}
	}
	run, err := p.Start(context.Background(), peerRequest("wait", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	first = "HTTP+JSON"
	mu.Unlock()
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	old, cur := built[0], built[1]
	mu.Unlock()
	if old.n() != 0 {
		t.Fatal("the replaced transport was closed under its running delegation")
	}
	close(hold)
	if res := runResult(t, run); res.Status != api.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	testkit.WaitFor(t, a2atest.Wait, "the replaced transport closed", func() bool { return old.n() == 1 })
	if cur.n() != 0 {
		t.Fatal("the current transport was closed")
	}
	p.Close()
	p.Close()
	if old.n() != 1 || cur.n() != 1 {
		t.Fatalf("closed %d and %d times, want once each", old.n(), cur.n())
	}
}
