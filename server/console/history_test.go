package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
)

// storeTasks is Tasks over a real MemoryStore, read as an operator (every
// caller's tasks) except the ids in hidden, which it may not see.
type storeTasks struct {
	s      *tasks.MemoryStore
	hidden map[a2a.TaskID]bool
	lists  []tasks.ListQuery
}

func (f *storeTasks) List(ctx context.Context, q tasks.ListQuery) (tasks.ListPage, error) {
	q.AnyOwner = true
	f.lists = append(f.lists, q)
	return f.s.List(ctx, q)
}

func (f *storeTasks) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error) {
	if f.hidden[id] {
		return nil, fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id)
	}
	t, _, err := f.s.Get(ctx, id)
	return t, err
}

func (f *storeTasks) Steps(ctx context.Context, root a2a.TaskID, after int64, limit int) ([]tasks.StepRecord, error) {
	return f.s.Steps(ctx, root, after, limit)
}

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// stored is a task created by owner at t0+i seconds, started a second
// before, with objective text.
func stored(t *testing.T, s *tasks.MemoryStore, id, owner, objective string, state a2a.TaskState, i int, meta map[string]any) {
	t.Helper()
	ts := t0.Add(time.Duration(i) * time.Second)
	m := map[string]any{api.MetaCaller: owner, api.MetaStarted: ts.Add(-time.Second).Format(time.RFC3339Nano),
		api.MetaUsage: map[string]any{"tokens_in": 10.0, "tokens_out": 5.0, "steps": 2.0}}
	for k, v := range meta {
		m[k] = v
	}
	task := &a2a.Task{ID: a2a.TaskID(id), ContextID: "ctx-" + owner, Status: a2a.TaskStatus{State: state, Timestamp: &ts}, Metadata: m,
		History: []*a2a.Message{{ID: "m-" + id, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: objective}}}}}
	if err := s.Create(context.Background(), task, owner); err != nil {
		t.Fatal(err)
	}
}

func historyServer(t *testing.T) (*httptest.Server, *storeTasks) {
	t.Helper()
	f := &storeTasks{s: tasks.NewMemoryStore(10000, 0), hidden: map[a2a.TaskID]bool{}}
	srv := httptest.NewServer(New(Config{Tree: (&fakeTree{}).tree, Tasks: f}))
	t.Cleanup(srv.Close)
	return srv, f
}

func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q", u, ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode
}

// The history: newest first, paged by position, each row with its start,
// duration, tokens, status and cause; filtered by state, caller, context,
// time and text; the filters go to the store as parameters.
func TestHistory(t *testing.T) {
	srv, f := historyServer(t)
	for i := range 30 {
		owner := "alice"
		if i%3 == 0 {
			owner = "bob"
		}
		state := a2a.TaskStateCompleted
		if i%5 == 0 {
			state = a2a.TaskStateFailed
		}
		stored(t, f.s, fmt.Sprintf("task-%02d", i), owner, fmt.Sprintf("objective %d\nsecond line", i), state, i,
			map[string]any{api.MetaStatus: "crashed", api.MetaCause: "intelligence_unreachable"})
	}
	var page HistoryPage
	if code := getJSON(t, srv.URL+TasksPath+"?size=10", &page); code != 200 {
		t.Fatalf("status %d", code)
	}
	if len(page.Tasks) != 10 || page.Total != 30 || page.NextPage == "" || page.Tasks[0].ID != "task-29" || page.Tasks[9].ID != "task-20" {
		t.Fatalf("first page: %d tasks of %d, next %q, %+v", len(page.Tasks), page.Total, page.NextPage, page.Tasks[0])
	}
	r := page.Tasks[0]
	if r.Objective != "objective 29\nsecond line" || r.Started == nil || r.DurationMS != 1000 || r.Usage.TokensIn != 10 || r.Usage.TokensOut != 5 ||
		r.Status != "crashed" || r.Cause != "intelligence_unreachable" || r.Caller != "alice" || r.State != "completed" {
		t.Fatalf("row %+v", r)
	}
	var next HistoryPage
	getJSON(t, srv.URL+TasksPath+"?size=10&page="+url.QueryEscape(page.NextPage), &next)
	if len(next.Tasks) != 10 || next.Tasks[0].ID != "task-19" {
		t.Fatalf("second page starts at %+v", next.Tasks)
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"state=failed&size=3", []string{"task-25", "task-20", "task-15"}},
		{"caller=bob&state=failed", []string{"task-15", "task-00"}},
		{"q=OBJECTIVE+7%0A", []string{"task-07"}}, // the text with its line break, any case
		{"q=task-1&caller=alice&size=2", []string{"task-19", "task-17"}},
		{"context=ctx-bob&after=" + url.QueryEscape(t0.Add(20*time.Second).Format(time.RFC3339)) + "&before=" + url.QueryEscape(t0.Add(28*time.Second).Format(time.RFC3339)), []string{"task-27", "task-24", "task-21"}},
		{"q=" + url.QueryEscape("' OR 1=1 --"), nil},
		{"q=" + url.QueryEscape("%_*"), nil},
		{"caller=" + url.QueryEscape("alice' --"), nil},
	} {
		var p HistoryPage
		if code := getJSON(t, srv.URL+TasksPath+"?"+c.query, &p); code != 200 {
			t.Fatalf("%s: status %d", c.query, code)
		}
		var got []string
		for _, r := range p.Tasks {
			got = append(got, r.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want %v", c.query, got, c.want)
		}
	}
	last := f.lists[len(f.lists)-1]
	if last.Caller == nil || *last.Caller != "alice' --" {
		t.Errorf("the caller filter did not reach the store as a value: %+v", last)
	}
}

// Bad filters get a clear 400 and reach no store; a page is never larger
// than MaxHistoryPage, whatever is stored.
func TestHistoryBadInput(t *testing.T) {
	srv, f := historyServer(t)
	for _, q := range []string{
		"size=0", "size=101", "size=-1", "size=1e3", "size=x",
		"state=working%27%20OR%201%3D1", "state=" + strings.Repeat("x", 100),
		"q=" + strings.Repeat("a", MaxFilterText+1),
		"caller=" + strings.Repeat("c", MaxFilterID+1),
		"context=" + strings.Repeat("c", MaxFilterID+1),
		"after=yesterday", "before=2026-13-01T00:00:00Z",
		"q=%ff%fe",
		"page=" + strings.Repeat("p", MaxFilterID+1),
	} {
		var e struct{ Error string }
		if code := getJSON(t, srv.URL+TasksPath+"?"+q, &e); code != 400 || !strings.HasPrefix(e.Error, "console: bad request: ") {
			t.Errorf("%.60s: %d %q", q, code, e.Error)
		}
	}
	if len(f.lists) != 0 {
		t.Fatalf("bad filters reached the store: %+v", f.lists)
	}
	var e struct{ Error string }
	if code := getJSON(t, srv.URL+TasksPath+"?page=bm90LWEtdG9rZW4", &e); code != 400 || !strings.Contains(e.Error, "pageToken") {
		t.Errorf("a forged page token: %d %q", code, e.Error)
	}
	// A huge history: 2000 tasks, a page of at most MaxHistoryPage.
	for i := range 2000 {
		stored(t, f.s, fmt.Sprintf("h-%04d", i), "", "x", a2a.TaskStateCompleted, i, nil)
	}
	var p HistoryPage
	getJSON(t, srv.URL+TasksPath+"?size=100", &p)
	if len(p.Tasks) != 100 || p.Total != 2000 || p.NextPage == "" {
		t.Fatalf("a page of the huge history: %d of %d", len(p.Tasks), p.Total)
	}
}

// A task's page data: the task, its tree's root through its parents, and
// the root's stored steps in order; an unknown task and one the caller may
// not see are the same 404, naming nothing of it; /ui/tasks/{id} is the
// page itself.
func TestTaskPage(t *testing.T) {
	srv, f := historyServer(t)
	ctx := context.Background()
	stored(t, f.s, "root", "alice", "the root", a2a.TaskStateCompleted, 1, nil)
	stored(t, f.s, "child", "alice", "the child", a2a.TaskStateCompleted, 2, map[string]any{api.MetaParentTask: "root", api.MetaAgentPath: "0.1"})
	stored(t, f.s, "secret", "mallory", "do not show", a2a.TaskStateCompleted, 3, nil)
	f.hidden["secret"] = true
	var recs []tasks.StepRecord
	for i, s := range []api.Step{
		{Kind: api.StepStart, TaskID: "root", AgentPath: "0", Objective: "the root"},
		{Kind: api.StepTool, TaskID: "root", AgentPath: "0", Tool: "subagent.spawn", Args: `{"objective":"the child"}`, Result: "child"},
		{Kind: api.StepStart, TaskID: "child", ParentID: "root", AgentPath: "0.1"},
		{Kind: api.StepModel, TaskID: "child", AgentPath: "0.1", TokensIn: 7, TokensOut: 3, DurationMS: 12, Endpoint: "builtin:script"},
		{Kind: api.StepEnd, TaskID: "child", AgentPath: "0.1", Status: "completed", Distillate: "line one\nline two"},
		{Kind: api.StepEnd, TaskID: "root", AgentPath: "0", Status: "completed"},
	} {
		s.At = t0.Add(time.Duration(i) * time.Second)
		b, _ := json.Marshal(s)
		recs = append(recs, tasks.StepRecord{Kind: s.Kind, Body: b})
	}
	if err := f.s.AddSteps(ctx, "root", recs, 1<<20); err != nil {
		t.Fatal(err)
	}
	var page TaskPage
	if code := getJSON(t, srv.URL+TaskPath+"?id=child", &page); code != 200 {
		t.Fatalf("status %d", code)
	}
	if page.Task.ID != "child" || page.RootID != "root" || len(page.Steps) != 6 || page.Steps[3].Endpoint != "builtin:script" ||
		page.Steps[4].Distillate != "line one\nline two" || page.Seqs[5] != 6 || page.History[0].Text != "the child" {
		t.Fatalf("page %+v", page)
	}
	getJSON(t, srv.URL+TaskPath+"?id=root&after=4", &page)
	if len(page.Steps) != 2 || page.Seqs[0] != 5 {
		t.Fatalf("steps after 4: %+v", page.Seqs)
	}
	for _, id := range []string{"secret", "nope", "x' OR '1'='1", "<script>alert(1)</script>"} {
		resp, err := http.Get(srv.URL + TaskPath + "?id=" + url.QueryEscape(id))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || strings.Contains(string(b), "mallory") || strings.Contains(string(b), "do not show") ||
			!strings.Contains(string(b), "no such task: it is unknown, expired, or not yours to see") {
			t.Errorf("task %q: %d %s", id, resp.StatusCode, b)
		}
	}
	for _, q := range []string{"", "id=", "id=root&after=-1", "id=root&after=x", "id=" + strings.Repeat("i", MaxFilterID+1)} {
		var e struct{ Error string }
		if code := getJSON(t, srv.URL+TaskPath+"?"+q, &e); code != 400 {
			t.Errorf("%.40s: %d %q", q, code, e.Error)
		}
	}
	// The page of a task, by its own URL: the console's page.
	for _, p := range []string{"/ui/tasks/root", "/ui/tasks/" + url.PathEscape("a b/c")} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `<script src="/ui/console.js"`) || resp.Header.Get("Content-Security-Policy") != CSP {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	resp, err := http.Get(srv.URL + "/ui/tasks/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("/ui/tasks/ without an id: %d", resp.StatusCode)
	}
}

// Without Tasks (a console given no store) the JSON routes are not there.
func TestHistoryWithoutTasks(t *testing.T) {
	srv := httptest.NewServer(New(Config{Tree: (&fakeTree{}).tree}))
	t.Cleanup(srv.Close)
	for _, p := range []string{TasksPath, TaskPath + "?id=x"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
}
