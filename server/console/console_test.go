package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// fakeTree is a tree the test changes.
type fakeTree struct {
	mu    sync.Mutex
	nodes []api.TreeNode
	calls int
}

func (f *fakeTree) tree() api.TreeResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return api.TreeResult{Nodes: append([]api.TreeNode(nil), f.nodes...), Breakers: []api.Breaker{}}
}

func (f *fakeTree) set(nodes ...api.TreeNode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = nodes
}

func TestStaticFiles(t *testing.T) {
	c := New(Config{Tree: (&fakeTree{}).tree})
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{
		"/ui/":            "text/html; charset=utf-8",
		"/ui/console.js":  "text/javascript; charset=utf-8",
		"/ui/console.css": "text/css; charset=utf-8",
		"/ui/icon.svg":    "image/svg+xml",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != want || len(b) == 0 {
			t.Errorf("%s: %s %q, %d bytes", path, resp.Status, resp.Header.Get("Content-Type"), len(b))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, d) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, d)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline code", path, csp)
		}
		if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", path, resp.Header)
		}
	}
	for _, path := range []string{"/ui/static/console.js", "/ui/../server.go", "/ui/nope", "/ui/console.go"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %s, want 404", path, resp.Status)
		}
	}
	resp, err := http.Post(srv.URL+"/ui/events", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/events: %s, want 405", resp.Status)
	}
}

// TestPageHasNoInlineCode: the page works under its own CSP only if it has
// no inline script, no inline style and nothing from another origin.
func TestPageHasNoInlineCode(t *testing.T) {
	html, err := static.ReadFile("static/index.html")
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	for _, bad := range []string{"<script>", "style=", "<style", "onclick", "onload", "javascript:", "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("index.html contains %q", bad)
		}
	}
	js, _ := static.ReadFile("static/console.js")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "eval(", "new Function", "http://", "https://", "document.write"} {
		if strings.Contains(string(js), bad) {
			t.Errorf("console.js contains %q", bad)
		}
	}
}

// stream reads the console's SSE events.
type stream struct {
	events chan Event
	cancel context.CancelFunc
	done   chan struct{}
}

func openStream(t *testing.T, url string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("stream: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	s := &stream{events: make(chan Event, 64), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == EventName:
				var ev Event
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err != nil {
					t.Errorf("event %q: %v", line, err)
					return
				}
				s.events <- ev
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-s.done })
	return s
}

func (s *stream) next(t *testing.T, within time.Duration) (Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		return ev, ok
	case <-time.After(within):
		return Event{}, false
	}
}

// TestStreamPushesChanges: the first snapshot comes at once; a change the
// supervisor reports is pushed long before the tick; an unchanged service
// sends nothing; a finished node moves from the tree to the ended list; a
// change no hook reports is found by the tick; Close ends the stream.
func TestStreamPushesChanges(t *testing.T) {
	ft := &fakeTree{}
	recent := NewRecent(2)
	c := New(Config{Tree: ft.tree, Recent: recent, Tick: time.Hour, KeepAlive: time.Hour,
		Gauges: func() []Gauge { return []Gauge{{Name: "g", Value: 1, Max: 2}} }})
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	s := openStream(t, srv.URL+EventsPath)

	ev, ok := s.next(t, 5*time.Second)
	if !ok || len(ev.Snapshot.Nodes) != 0 || len(ev.Snapshot.Gauges) != 1 || ev.At.IsZero() {
		t.Fatalf("first event %+v %v", ev, ok)
	}
	node := api.TreeNode{AgentPath: "0", TaskID: "t0", Status: "running", Depth: 0}
	child := api.TreeNode{AgentPath: "0.1", TaskID: "t1", ParentTaskID: "t0", Status: "starting", Depth: 1}
	ft.set(node, child)
	recent.NodeStarted(supervisor.NodeInfo{Handle: "t1"})
	ev, ok = s.next(t, 5*time.Second)
	if !ok || len(ev.Snapshot.Nodes) != 2 || ev.Snapshot.Nodes[1].Status != "starting" {
		t.Fatalf("after a start: %+v %v", ev.Snapshot.Nodes, ok)
	}
	// Nothing changed: a poke sends nothing.
	recent.Changed()
	if ev, ok := s.next(t, 200*time.Millisecond); ok {
		t.Fatalf("an unchanged snapshot was sent again: %+v", ev.Snapshot)
	}
	// The child's model text streams: it is pushed, its tail shown.
	recent.NodeText(supervisor.NodeInfo{Handle: "t1"}, 1, "thinking ")
	recent.NodeText(supervisor.NodeInfo{Handle: "t1"}, 1, "aloud")
	ev, ok = s.next(t, 5*time.Second)
	if !ok || ev.Snapshot.Texts["t1"] != "thinking aloud" {
		if ok && ev.Snapshot.Texts["t1"] == "thinking " { // the pieces came as two pushes
			ev, ok = s.next(t, 5*time.Second)
		}
		if !ok || ev.Snapshot.Texts["t1"] != "thinking aloud" {
			t.Fatalf("after the child's text: %+v %v", ev.Snapshot.Texts, ok)
		}
	}
	// The child ends: the supervisor reports it before it leaves the live
	// tree, and the console shows it as ended only.
	recent.NodeFinished(supervisor.NodeInfo{Handle: "t1", AgentPath: "0.1", ParentHandle: "t0", RootHandle: "t0", Depth: 1, Objective: strings.Repeat("x", 500)},
		api.SubagentResult{Status: api.StatusCancelled, Cause: "operator", Usage: api.Usage{TokensIn: 3}})
	ev, ok = s.next(t, 5*time.Second)
	if !ok || len(ev.Snapshot.Nodes) != 1 || len(ev.Snapshot.Ended) != 1 || len(ev.Snapshot.Texts) != 0 {
		t.Fatalf("after the end: %+v %v", ev.Snapshot, ok)
	}
	if e := ev.Snapshot.Ended[0]; e.TaskID != "t1" || e.Status != api.StatusCancelled || e.Provider != "local" ||
		len([]rune(e.Objective)) != api.MaxTreeObjective || e.Usage.TokensIn != 3 {
		t.Fatalf("ended %+v", e)
	}
	c.Close()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the stream")
	}
}

func TestStreamTick(t *testing.T) {
	ft := &fakeTree{}
	c := New(Config{Tree: ft.tree, Tick: 20 * time.Millisecond})
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	s := openStream(t, srv.URL+EventsPath)
	if _, ok := s.next(t, 5*time.Second); !ok {
		t.Fatal("no first event")
	}
	// No hook: the tick finds the change.
	ft.set(api.TreeNode{AgentPath: "0", TaskID: "t0", Status: "paused"})
	ev, ok := s.next(t, 5*time.Second)
	if !ok || len(ev.Snapshot.Nodes) != 1 || ev.Snapshot.Nodes[0].Status != "paused" {
		t.Fatalf("tick: %+v %v", ev.Snapshot, ok)
	}
}

// TestRecentTexts: a live subagent's streamed text is kept to its last
// MaxText characters, a new step's starts over, and its end drops it.
func TestRecentTexts(t *testing.T) {
	r := NewRecent(3)
	n := supervisor.NodeInfo{Handle: "t1"}
	r.NodeText(n, 1, strings.Repeat("a", MaxText))
	r.NodeText(n, 1, "bé")
	if got := []rune(r.Texts()["t1"]); len(got) != MaxText || got[0] != '…' || string(got[len(got)-2:]) != "bé" {
		t.Errorf("tail %q", string(got))
	}
	r.NodeText(n, 2, "next step")
	if got := r.Texts()["t1"]; got != "next step" {
		t.Errorf("a new step: %q", got)
	}
	r.NodeFinished(n, api.SubagentResult{Status: api.StatusCompleted})
	if got := r.Texts(); len(got) != 0 {
		t.Errorf("after the end: %v", got)
	}
}

func TestRecentKeepsTheLast(t *testing.T) {
	r := NewRecent(3)
	for _, h := range []string{"a", "b", "c", "d", "e"} {
		r.NodeFinished(supervisor.NodeInfo{Handle: h}, api.SubagentResult{Status: api.StatusCompleted})
	}
	var got []string
	for _, e := range r.Ended() {
		got = append(got, e.TaskID)
	}
	if strings.Join(got, ",") != "e,d,c" {
		t.Fatalf("ended %v, want e,d,c (newest first)", got)
	}
}

// TestStreamKeepAlive: an idle stream gets SSE comments.
func TestStreamKeepAlive(t *testing.T) {
	c := New(Config{Tree: (&fakeTree{}).tree, Tick: time.Hour, KeepAlive: 20 * time.Millisecond})
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+EventsPath, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	deadline := time.Now().Add(5 * time.Second)
	for sc.Scan() && time.Now().Before(deadline) {
		if sc.Text() == ": keep-alive" {
			return
		}
	}
	t.Fatal("no keep-alive comment")
}
