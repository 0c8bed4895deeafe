package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor"
)

// The test binary is also the subagent: the supervisor re-execs it with
// AGENT_SUBAGENT set, and TestMain runs agentd's real subagent mode (the loop
// with a builtin:script model) instead of the tests. So every tool call below
// travels model -> loop -> control channel -> supervisor scope check -> this
// package -> MCP over HTTP -> the test server, and back.
func TestMain(m *testing.M) {
	if os.Getenv(api.EnvSubagent) != "" {
		os.Exit(agent.Main())
	}
	goleak.VerifyTestMain(m, testkit.LeakOptions()...)
}

// call is one tools/call the test server received.
type call struct {
	Tool string
	Meta map[string]any
	Args json.RawMessage
}

// testServer is an MCP server from the SDK, served over streamable HTTP on
// 127.0.0.1, with tools that echo, fail, answer big, answer with an image,
// and block until cancelled. It records every tools/call. stop and start
// simulate a restart on the same address: the new instance knows none of the
// old sessions.
type testServer struct {
	t         *testing.T
	addr      string
	token     string // if set, requests need "Authorization: Bearer token"
	stateless bool

	mu         sync.Mutex
	calls      []call
	reads      []call // resources/read requests of test://greeting and test://bin, Tool holding the uri
	slowIn     int    // slow calls started
	slowEnded  int    // slow calls whose context ended before they finished
	srv        *httptest.Server
	sdkSrv     *sdk.Server
	value      string   // the content of testResource
	subscribes []string // resources/subscribe requests received, by uri
}

// testResource is the test server's one subscribable resource; its content
// is the value setValue last set.
const testResource = "test://value"

// testGreeting is the text of the test server's resource test://greeting.
const testGreeting = "hello from a resource"

// testTools are the tools the test server lists, in order.
var testTools = []string{"echo", "fail", "big", "image", "slow", "whoami", "noargs"}

func newTestServer(t *testing.T, token string) *testServer {
	return newTestServerMode(t, token, false)
}

// newTestServerMode starts a test server; a stateless one keeps no sessions
// and speaks the stateless protocol (2026-07-28) to clients that offer it.
func newTestServerMode(t *testing.T, token string, stateless bool) *testServer {
	ts := &testServer{t: t, token: token, stateless: stateless}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.addr = ln.Addr().String()
	ts.startOn(ln)
	t.Cleanup(ts.stop)
	return ts
}

func (ts *testServer) url() string { return "http://" + ts.addr + "/mcp" }

func (ts *testServer) record(req *sdk.CallToolRequest) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.calls = append(ts.calls, call{Tool: req.Params.Name, Meta: req.Params.Meta, Args: req.Params.Arguments})
}

func (ts *testServer) recordRead(req *sdk.ReadResourceRequest) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.reads = append(ts.reads, call{Tool: req.Params.URI, Meta: req.Params.Meta})
}

func (ts *testServer) recordedReads() []call {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]call(nil), ts.reads...)
}

func (ts *testServer) recorded() []call {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]call(nil), ts.calls...)
}

func (ts *testServer) slowCounts() (int, int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.slowIn, ts.slowEnded
}

func object(props string) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
}

func textResult(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func (ts *testServer) mcpServer() *sdk.Server {
	// PageSize 2: listing the 7 tools takes 4 pages.
	s := sdk.NewServer(&sdk.Implementation{Name: "agentd-test", Version: "1"}, &sdk.ServerOptions{
		PageSize: 2,
		SubscribeHandler: func(_ context.Context, req *sdk.SubscribeRequest) error {
			ts.mu.Lock()
			defer ts.mu.Unlock()
			ts.subscribes = append(ts.subscribes, req.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
	})
	s.AddResource(&sdk.Resource{Name: "value", URI: testResource, MIMEType: "text/plain"},
		func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			ts.mu.Lock()
			defer ts.mu.Unlock()
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: ts.value}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "echo", Description: "Echoes a message back.", InputSchema: object(`"message":{"type":"string"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.record(req)
			var a struct{ Message string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return textResult("echo: " + a.Message), nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Always fails.", InputSchema: object(``)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.record(req)
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "it failed on purpose"}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "big", Description: "Answers n bytes.", InputSchema: object(`"n":{"type":"integer"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.record(req)
			var a struct{ N int }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			// Multi-byte runes, so a cut must land on a rune boundary.
			return textResult(strings.Repeat("é", a.N/2)), nil
		})
	s.AddTool(&sdk.Tool{Name: "image", Description: "An image and structured content.", InputSchema: object(``)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.record(req)
			return &sdk.CallToolResult{
				Content:           []sdk.Content{&sdk.TextContent{Text: "a picture:"}, &sdk.ImageContent{MIMEType: "image/png", Data: []byte("12345678")}},
				StructuredContent: map[string]any{"width": 2, "height": 4},
			}, nil
		})
	s.AddTool(&sdk.Tool{Name: "slow", Description: "Blocks until cancelled.", InputSchema: object(``)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.record(req)
			ts.mu.Lock()
			ts.slowIn++
			ts.mu.Unlock()
			select {
			case <-ctx.Done():
				ts.mu.Lock()
				ts.slowEnded++
				ts.mu.Unlock()
				return nil, ctx.Err()
			case <-time.After(time.Minute):
				return textResult("slow done"), nil
			}
		})
	s.AddTool(&sdk.Tool{Name: "whoami", Description: "Answers the request's _meta.", InputSchema: object(``)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.record(req)
			return textResult(fmt.Sprintf("run %v", req.Params.Meta[MetaRunID])), nil
		})
	s.AddTool(&sdk.Tool{Name: "noargs", Title: "No arguments", InputSchema: object(``)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.record(req)
			return textResult("args " + string(req.Params.Arguments)), nil
		})
	s.AddResource(&sdk.Resource{URI: "test://greeting", Name: "greeting", MIMEType: "text/plain"},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			ts.recordRead(req)
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: testGreeting}}}, nil
		})
	s.AddResource(&sdk.Resource{URI: "test://bin", Name: "bin", MIMEType: "application/octet-stream"},
		func(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			ts.recordRead(req)
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2, 250}}}}, nil
		})
	return s
}

func (ts *testServer) startOn(ln net.Listener) {
	srv := ts.mcpServer()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: ts.stateless})
	var handler http.Handler = h
	if ts.token != "" {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+ts.token {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	hs := httptest.NewUnstartedServer(handler)
	hs.Listener.Close()
	hs.Listener = ln
	hs.Start()
	ts.mu.Lock()
	ts.srv = hs
	ts.sdkSrv = srv
	ts.mu.Unlock()
}

// setValue changes testResource's content and, with notify, tells the
// subscribed sessions.
func (ts *testServer) setValue(v string, notify bool) {
	ts.mu.Lock()
	ts.value = v
	srv := ts.sdkSrv
	ts.mu.Unlock()
	if notify && srv != nil {
		_ = srv.ResourceUpdated(context.Background(), &sdk.ResourceUpdatedNotificationParams{URI: testResource})
	}
}

func (ts *testServer) subscribed() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.subscribes)
}

// stop shuts the server down, dropping every connection and session: a
// session whose client could not end it (the server was gone) ends here, as
// it would with the server's process.
func (ts *testServer) stop() {
	ts.mu.Lock()
	hs, srv := ts.srv, ts.sdkSrv
	ts.srv, ts.sdkSrv = nil, nil
	ts.mu.Unlock()
	if hs != nil {
		hs.CloseClientConnections()
		hs.Close()
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	}
}

// start serves again on the same address, as a fresh process would.
func (ts *testServer) start() {
	var ln net.Listener
	var err error
	testkit.WaitFor(ts.t, 10*time.Second, "re-listen on "+ts.addr, func() bool {
		ln, err = net.Listen("tcp", ts.addr)
		return err == nil
	})
	ts.startOn(ln)
}

// harness is a supervisor whose tool servers are a Set.
type harness struct {
	t    *testing.T
	logs *testkit.Buffer
	set  *Set
	cfg  Config
	sup  *supervisor.Supervisor
	obs  *pidObserver
}

// pidObserver records every child's pid, to check none is left behind.
type pidObserver struct {
	mu   sync.Mutex
	pids []int
}

func (o *pidObserver) NodeStarted(n supervisor.NodeInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pids = append(o.pids, n.PID)
}
func (o *pidObserver) NodeProgress(supervisor.NodeInfo)                     {}
func (o *pidObserver) NodeFinished(supervisor.NodeInfo, api.SubagentResult) {}

func newHarness(t *testing.T, cfg Config, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, logs: &testkit.Buffer{}, cfg: cfg, obs: &pidObserver{}}
	log := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Logger = log
	set, err := NewSet(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.set = set
	set.Start()
	t.Cleanup(set.Close)
	sup, err := supervisor.New(supervisor.Config{
		Logger:     log,
		Tools:      set.ToolServers(),
		ToolTags:   cfg.Tagger(),
		Observer:   h.obs,
		SpawnReady: 10 * time.Second,
		DrainGrace: 300 * time.Millisecond,
		KillGrace:  300 * time.Millisecond,
		// The tests read the tool results the scripts saw from the log.
		LogContent: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.sup = sup
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sup.Shutdown(ctx); err != nil {
			t.Errorf("supervisor shutdown: %v", err)
		}
		h.obs.mu.Lock()
		defer h.obs.mu.Unlock()
		for _, pid := range h.obs.pids {
			testkit.WaitFor(t, 10*time.Second, fmt.Sprintf("process group %d gone", pid), func() bool { return testkit.GroupGone(pid) })
		}
		if t.Failed() {
			t.Logf("log:\n%s", h.logs.String())
		}
	})
	return h
}

// waitRequired waits for the required servers.
func (h *harness) waitRequired(within time.Duration) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := h.set.WaitRequired(ctx); err != nil {
		h.t.Fatal(err)
	}
}

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// start starts a root subagent playing script with this grant.
func (h *harness) start(runID, script string, grant []api.ToolRef) *supervisor.Run {
	h.t.Helper()
	file := filepath.Join(h.t.TempDir(), "script.txt")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		h.t.Fatal(err)
	}
	run, err := h.sup.Start(context.Background(), supervisor.StartRequest{Payload: api.SpawnPayload{
		Contract:     api.OutputContract{Objective: "use the tools", OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Scope:        api.ToolScope{Allow: grant},
		Limits:       api.Limits{MaxSteps: 30, MaxTokens: 1_000_000, Deadline: api.Duration(time.Minute), MaxChildren: 4},
		Telemetry:    api.Telemetry{RunID: runID, Traceparent: testTraceparent},
		Intelligence: api.Intelligence{Endpoint: "builtin:script=" + file},
	}})
	if err != nil {
		h.t.Fatal(err)
	}
	return run
}

// wait waits for a run's whole tree and returns the root's result.
func (h *harness) wait(run *supervisor.Run) api.SubagentResult {
	h.t.Helper()
	select {
	case <-run.TreeDone():
	case <-time.After(60 * time.Second):
		h.t.Fatalf("run did not end within 60s\n%s", h.logs.String())
	}
	return run.Result()
}

// observed is one tool result a script saw.
type observed struct {
	Path    string
	Tool    string
	IsError bool
	Text    string
}

// observedBy returns the tool results the scripted models saw, in order.
func (h *harness) observed() []observed {
	var out []observed
	for _, r := range h.logs.Records("script observed") {
		o := observed{}
		o.Path, _ = r["agent_path"].(string)
		o.Tool, _ = r["tool"].(string)
		o.IsError, _ = r["is_error"].(bool)
		o.Text, _ = r["text"].(string)
		out = append(out, o)
	}
	return out
}

func refs(server string, tools ...string) []api.ToolRef {
	var out []api.ToolRef
	for _, t := range tools {
		out = append(out, api.ToolRef{Server: server, Tool: t})
	}
	return out
}

// supervisorNode is a caller for direct Server.Call tests.
func supervisorNode(runID string) supervisor.NodeInfo {
	return supervisor.NodeInfo{RunID: runID, AgentPath: "0"}
}
