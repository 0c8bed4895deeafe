package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/server/console"
)

// fakeOperator answers the console's JSON-RPC calls as the a2a.* contract
// says (api/operator.go): a2a.Pause, and a2a.Audit over the actions it
// served, newest first, filtered by method and caller, bounded by limit.
// With unserved set, every method is unknown (-32601).
type fakeOperator struct {
	mu       sync.Mutex
	records  []api.AuditRecord // oldest first
	params   []api.AuditParams
	unserved bool
}

func (f *fakeOperator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := map[string]any{"jsonrpc": "2.0", "id": req.ID}
	switch {
	case f.unserved:
		reply["error"] = map[string]any{"code": -32601, "message": "Method not found"}
	case req.Method == api.OpPause:
		f.records = append(f.records, api.AuditRecord{Time: time.Now().UTC(), Caller: "spiffe://test/operator", Method: api.OpPause, Outcome: "ok", Instance: "instance-1"})
		reply["result"] = map[string]any{"affected": 0}
	case req.Method == api.OpAudit:
		var p api.AuditParams
		if len(req.Params) > 0 {
			json.Unmarshal(req.Params, &p)
		}
		f.params = append(f.params, p)
		out := api.AuditResult{Records: []api.AuditRecord{}}
		for _, rec := range slices.Backward(f.records) {
			if (p.Method == "" || rec.Method == p.Method) && (p.Caller == "" || rec.Caller == p.Caller) && len(out.Records) < max(p.Limit, 1) {
				out.Records = append(out.Records, rec)
			}
		}
		reply["result"] = out
	default:
		reply["error"] = map[string]any{"code": -32601, "message": "Method not found"}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(reply)
}

// TestConsoleLiveStatesAndAudit drives the console's page in real chromium
// against the console's own handler, whose stream the test holds back: until
// the first snapshot the page says it is connecting, states nothing about
// the trees and has every action disabled; then it is live with its actions;
// a lost stream says so (actions disabled again) and the page reconnects by
// itself; an empty gauge draws an empty track in the light and the dark
// scheme; an operator action (pause, through its confirmation) shows in the
// audit panel, which calls a2a.Audit as api/operator.go has it (served here
// by a fake: the method is served by the service on another branch), with
// its filters; an unserved a2a.Audit is said so.
func TestConsoleLiveStatesAndAudit(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	newConsole := func() *console.Console {
		return console.New(console.Config{
			Tree:   func() api.TreeResult { return api.TreeResult{Nodes: []api.TreeNode{}, Breakers: []api.Breaker{}} },
			Gauges: func() []console.Gauge { return []console.Gauge{{Name: "empty queue", Value: 0, Max: 10}} },
			Tick:   20 * time.Millisecond,
		})
	}
	var cur atomic.Pointer[console.Console]
	cur.Store(newConsole())
	var gate atomic.Pointer[chan struct{}] // the stream's requests wait until it is closed
	held := make(chan struct{})
	gate.Store(&held)
	op := &fakeOperator{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ui/events", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-*gate.Load():
		case <-r.Context().Done():
			return
		}
		cur.Load().ServeHTTP(w, r)
	})
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) { cur.Load().ServeHTTP(w, r) })
	mux.Handle("/", op)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		cur.Load().Close()
		select {
		case <-*gate.Load():
		default:
			close(*gate.Load())
		}
		srv.Close()
	})

	b.do(t, "open the console", chromedp.Navigate(srv.URL+"/ui/"))
	b.wait(t, "connecting", `document.getElementById("conn").innerText === "Connecting…"`)
	connecting := evalJS[map[string]any](t, b, `({
		disabled: [...document.querySelectorAll(".actions button")].every(b => b.disabled),
		trees: document.getElementById("trees-empty").innerText,
		ended: document.getElementById("ended-empty").innerText })`)
	if connecting["disabled"] != true || !strings.HasPrefix(connecting["trees"].(string), "Connecting") || !strings.HasPrefix(connecting["ended"].(string), "Connecting") {
		t.Fatalf("while connecting: %v", connecting)
	}
	close(held)
	b.wait(t, "live", `document.getElementById("conn").innerText === "Live" && !document.getElementById("act-pause").disabled &&
		document.getElementById("trees-empty").innerText === "No live subagents." && document.getElementById("ended-empty").innerText === "Nothing has ended yet."`)

	// An empty gauge: an empty track of the page's colours, light and dark.
	for _, scheme := range []struct{ name, track string }{{"light", "rgb(231, 235, 239)"}, {"dark", "rgb(38, 44, 54)"}} {
		if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme.name}},
		}); err != nil {
			t.Fatal(err)
		}
		got := evalJS[map[string]any](t, b, `(() => { const m = document.querySelector("#gauges meter");
			return { value: m.value, max: m.max, bg: getComputedStyle(m).backgroundColor, page: getComputedStyle(document.body).backgroundColor }; })()`)
		if got["value"] != 0.0 || got["max"] != 10.0 || got["bg"] != scheme.track {
			t.Errorf("%s: the empty gauge %v, want track %s", scheme.name, got, scheme.track)
		}
	}

	// A lost stream: said, actions off; the page reconnects by itself.
	again := make(chan struct{})
	gate.Store(&again)
	old := cur.Swap(newConsole())
	old.Close()
	b.wait(t, "the loss is said", `document.getElementById("conn").innerText.startsWith("Connection lost: reconnecting") &&
		document.getElementById("act-pause").disabled && document.body.classList.contains("stale")`)
	close(again)
	b.wait(t, "live again", `document.getElementById("conn").innerText === "Live" && !document.getElementById("act-pause").disabled`)

	// An operator action, then the audit panel.
	b.do(t, "pause", chromedp.Click(chromedp.ID("act-pause")))
	b.wait(t, "the confirmation", `document.getElementById("confirm").open`)
	b.do(t, "confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	b.wait(t, "paused", `document.getElementById("info").innerText === "Paused: 0 subagents told."`)
	b.do(t, "open the audit", chromedp.Click(chromedp.ID("nav-audit")))
	b.wait(t, "the audit lists the pause", `document.querySelectorAll("#audit tbody tr").length === 1 &&
		document.querySelector("#audit tbody tr").dataset.method === "a2a.Pause"`)
	row := evalJS[string](t, b, `document.querySelector("#audit tbody tr").innerText`)
	if !strings.Contains(row, "spiffe://test/operator") || !strings.Contains(row, "ok") {
		t.Errorf("the audit row %q", row)
	}
	b.do(t, "filter the audit", setValue("#a-method", "a2a.Drain"), chromedp.Click(chromedp.CSS(`#audit-form button`)))
	b.wait(t, "nothing drained", `document.getElementById("audit-status").innerText === "No operator action is recorded." && document.getElementById("audit").hidden`)
	op.mu.Lock()
	last := op.params[len(op.params)-1]
	op.unserved = true
	op.mu.Unlock()
	if last.Method != "a2a.Drain" || last.Limit <= 0 || last.Limit > api.MaxAuditLimit {
		t.Errorf("a2a.Audit params %+v", last)
	}
	b.do(t, "read the audit of a service without it", chromedp.Click(chromedp.CSS(`#audit-form button`)))
	b.wait(t, "said so", `document.getElementById("audit-status").innerText.startsWith("The audit trail could not be read: a2a.Audit: Method not found (-32601)")`)
	if !strings.HasSuffix(evalJS[string](t, b, `location.href`), "/ui/#audit") {
		t.Errorf("the audit's address")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		if strings.Contains(p, "EventSource") || strings.Contains(p, "/ui/events") {
			continue // the stream's loss, logged by the browser
		}
		t.Errorf("the page reported: %s", p)
	}
}

// memTasks is console.Tasks over a real MemoryStore, read as an operator.
type memTasks struct{ s *tasks.MemoryStore }

func (m memTasks) List(ctx context.Context, q tasks.ListQuery) (tasks.ListPage, error) {
	q.AnyOwner = true
	return m.s.List(ctx, q)
}

func (m memTasks) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	t, _, err := m.s.Get(ctx, id)
	return t, err
}

func (m memTasks) Steps(ctx context.Context, root a2a.TaskID, after int64, limit int) ([]tasks.StepRecord, error) {
	return m.s.Steps(ctx, root, after, limit)
}

// TestConsoleHugeHistory: 2000 stored tasks, each with a long objective: the
// page holds one page of rows at a time (at most 100, whatever the address
// asks), pages through them by position, and a request past the bound is
// refused with what is wrong.
func TestConsoleHugeHistory(t *testing.T) {
	t.Parallel()
	b := startBrowser(t)
	s := tasks.NewMemoryStore(5000, 0)
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("a long objective line\n", 100)
	for i := range 2000 {
		ts := base.Add(time.Duration(i) * time.Second)
		if err := s.Create(context.Background(), &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("t-%04d", i)), ContextID: "c",
			Status:  a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &ts},
			History: []*a2a.Message{{ID: fmt.Sprintf("m-%d", i), Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: long}}}}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	c := console.New(console.Config{
		Tree:  func() api.TreeResult { return api.TreeResult{Nodes: []api.TreeNode{}, Breakers: []api.Breaker{}} },
		Tasks: memTasks{s},
	})
	srv := httptest.NewServer(c)
	t.Cleanup(func() { c.Close(); srv.Close() })
	b.do(t, "open the history", chromedp.Navigate(srv.URL+"/ui/#history"))
	b.wait(t, "a first page", `document.querySelectorAll("#history tbody tr").length === 25 &&
		document.getElementById("history-status").innerText === "Tasks 1–25 of 2000, newest first."`)
	b.do(t, "100 a page", setValue("#f-size", "100"), chromedp.Click(chromedp.CSS("#f-apply")))
	for page := 1; page <= 5; page++ {
		b.wait(t, fmt.Sprintf("page %d", page), fmt.Sprintf(`document.querySelectorAll("#history tbody tr").length === 100 &&
			document.getElementById("history-pos").innerText === "page %d of 20" &&
			document.querySelector("#history tbody tr").dataset.taskId === "t-%04d"`, page, 2000-(page-1)*100-1))
		b.do(t, "older", chromedp.Click(chromedp.CSS("#history-older")))
	}
	if n := evalJS[int](t, b, `document.querySelectorAll("#history tr").length`); n > 101 {
		t.Errorf("the page holds %d rows", n)
	}
	// The objective is cut to console.MaxObjective characters.
	if n := evalJS[int](t, b, `document.querySelector("#history tbody .objective").textContent.length`); n > console.MaxObjective {
		t.Errorf("an objective of %d characters", n)
	}
	resp, err := http.Get(srv.URL + "/ui/api/tasks?size=5000")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("a page of 5000: HTTP %d", resp.StatusCode)
	}
}
