package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
)

// The console's JSON routes and its task pages.
const (
	// TasksPath is GET the history: one page of the stored tasks, newest
	// first (HistoryPage), filtered by the query's state, caller, context,
	// q (a task id or text of its objective), after and before (RFC 3339),
	// paged by size (1..MaxHistoryPage) and page (a NextPage).
	TasksPath = Path + "api/tasks"
	// TaskPath is GET one task's page data (TaskPage): ?id=, and after=
	// (a step's sequence number) to read its tree's steps on from there.
	TaskPath = Path + "api/task"
	// TaskPagePath is the prefix of a task's own page, /ui/tasks/{id}: the
	// console's page, which routes on the path.
	TaskPagePath = Path + "tasks/"
)

// Bounds of the history's and a task page's requests.
const (
	DefaultHistoryPage = 25
	MaxHistoryPage     = tasks.MaxPageSize
	MaxFilterText      = 200  // characters of q
	MaxFilterID        = 512  // bytes of a caller, context, task id or page token
	MaxObjective       = 2000 // characters of an objective the history shows
	MaxStepsPage       = 500  // steps of one task page's answer
	maxMessageText     = api.MaxStepText
	maxRootHops        = 32 // parents followed up to a tree's root
)

// Tasks is what the console reads of the stored tasks, as the caller of the
// request's context may see them (the engine's authorization: an operator
// sees every task).
type Tasks interface {
	// List is tasks/list (Engine.ListTasks) with the console's filters.
	List(ctx context.Context, q tasks.ListQuery) (tasks.ListPage, error)
	// Get is tasks/get of id, with its latest history messages: an
	// unknown task, and one the caller may not see, wrap
	// a2a.ErrTaskNotFound.
	Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, error)
	// Steps are the steps of a tree whose root is root (tasks.StepStore);
	// none when the store keeps none.
	Steps(ctx context.Context, root a2a.TaskID, after int64, limit int) ([]tasks.StepRecord, error)
}

// TaskRow is one task of the history.
type TaskRow struct {
	ID         string     `json:"id"`
	ContextID  string     `json:"context_id"`
	State      string     `json:"state"`
	Status     string     `json:"status,omitempty"` // agentd's exact status once ended
	Cause      string     `json:"cause,omitempty"`
	Caller     string     `json:"caller"`
	AgentPath  string     `json:"agent_path,omitempty"`
	ParentTask string     `json:"parent_task,omitempty"`
	Objective  string     `json:"objective"`
	Started    *time.Time `json:"started,omitempty"`
	Updated    *time.Time `json:"updated,omitempty"`
	// DurationMS is from its start to its end, or to now while it runs.
	DurationMS int64     `json:"duration_ms,omitempty"`
	Usage      api.Usage `json:"usage"`
}

// HistoryPage is the answer of TasksPath.
type HistoryPage struct {
	Tasks    []TaskRow `json:"tasks"`
	NextPage string    `json:"next_page,omitempty"`
	Total    int       `json:"total"`
	PageSize int       `json:"page_size"`
}

// Message is a task's history message as its page shows it.
type Message struct {
	Role string `json:"role"`
	Text string `json:"text"`
}

// TaskPage is the answer of TaskPath: the task, its tree's root and the
// root's steps (a page of them: NextAfter reads on).
type TaskPage struct {
	Task      TaskRow    `json:"task"`
	RootID    string     `json:"root_id"`
	History   []Message  `json:"history"`
	Artifacts []Message  `json:"artifacts"`
	Steps     []api.Step `json:"steps"`
	Seqs      []int64    `json:"seqs"`
	NextAfter int64      `json:"next_after,omitempty"` // more steps after this sequence number
}

// errBadFilter refuses a history or task request it cannot serve.
var errBadFilter = errors.New("console: bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadFilter, fmt.Sprintf(format, args...))
}

// historyQuery reads a history request's query.
func historyQuery(r *http.Request) (tasks.ListQuery, error) {
	v := r.URL.Query()
	q := tasks.ListQuery{PageSize: DefaultHistoryPage}
	zero := 0
	q.HistoryLength = &zero // the objective is the first message: kept below
	if s := v.Get("size"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxHistoryPage {
			return q, badRequest("size must be a number in 1..%d", MaxHistoryPage)
		}
		q.PageSize = n
	}
	for _, f := range []struct {
		name string
		max  int
		to   *string
	}{{"context", MaxFilterID, &q.ContextID}, {"page", MaxFilterID, &q.PageToken}} {
		s := v.Get(f.name)
		if len(s) > f.max || !utf8.ValidString(s) {
			return q, badRequest("%s must be valid UTF-8 of at most %d bytes", f.name, f.max)
		}
		*f.to = s
	}
	if v.Has("caller") {
		c := v.Get("caller")
		if len(c) > MaxFilterID || !utf8.ValidString(c) {
			return q, badRequest("caller must be valid UTF-8 of at most %d bytes", MaxFilterID)
		}
		q.Caller = &c
	}
	text := strings.TrimSpace(v.Get("q"))
	if utf8.RuneCountInString(text) > MaxFilterText || !utf8.ValidString(text) {
		return q, badRequest("q must be valid UTF-8 of at most %d characters", MaxFilterText)
	}
	q.Text = text
	if s := v.Get("state"); s != "" {
		st := a2a.TaskState(s)
		switch st {
		case a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
			a2a.TaskStateCompleted, a2a.TaskStateCanceled, a2a.TaskStateFailed, a2a.TaskStateRejected:
			q.State = st
		default:
			return q, badRequest("state %q is not a task state", clip(s, 40))
		}
	}
	for _, f := range []struct {
		name string
		to   *time.Time
	}{{"after", &q.UpdatedAfter}, {"before", &q.UpdatedBefore}} {
		s := v.Get(f.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return q, badRequest("%s must be an RFC 3339 time", f.name)
		}
		*f.to = t
	}
	return q, nil
}

// serveHistory is GET TasksPath.
func (c *Console) serveHistory(w http.ResponseWriter, r *http.Request) {
	q, err := historyQuery(r)
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err)
		return
	}
	// The objective is the first message: a history without messages would
	// lose it, so the whole history is read and cut here, a page at a time.
	q.HistoryLength = nil
	page, err := c.cfg.Tasks.List(r.Context(), q)
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, a2a.ErrInvalidParams) {
			status = http.StatusBadRequest
		}
		writeJSONError(w, status, err)
		return
	}
	now := time.Now().UTC()
	out := HistoryPage{Tasks: make([]TaskRow, 0, len(page.Tasks)), NextPage: page.NextPageToken, Total: page.TotalSize, PageSize: q.PageSize}
	for _, t := range page.Tasks {
		out.Tasks = append(out.Tasks, row(t, now))
	}
	writeJSON(w, out)
}

// row is t as the history shows it, at now.
func row(t *a2a.Task, now time.Time) TaskRow {
	m := t.Metadata
	str := func(k string) string { s, _ := m[k].(string); return s }
	out := TaskRow{
		ID: string(t.ID), ContextID: t.ContextID, State: string(t.Status.State), Status: str(api.MetaStatus), Cause: str(api.MetaCause),
		Caller: str(api.MetaCaller), AgentPath: str(api.MetaAgentPath), ParentTask: str(api.MetaParentTask), Updated: t.Status.Timestamp,
	}
	if len(t.History) > 0 && t.History[0] != nil {
		out.Objective = clip(messageText(t.History[0]), MaxObjective)
	}
	if u, ok := m[api.MetaUsage]; ok { // a map once stored, the engine's value before
		if b, err := json.Marshal(u); err == nil {
			_ = json.Unmarshal(b, &out.Usage)
		}
	}
	if s, err := time.Parse(time.RFC3339Nano, str(api.MetaStarted)); err == nil {
		out.Started = &s
		end := now
		if t.Status.State.Terminal() && t.Status.Timestamp != nil {
			end = *t.Status.Timestamp
		}
		if d := end.Sub(s); d > 0 {
			out.DurationMS = d.Milliseconds()
		}
	}
	return out
}

// messageText is the text of a message's parts, a data part as its JSON and
// a file as its name or URI, one part a line.
func messageText(msg *a2a.Message) string {
	var b strings.Builder
	for i, p := range msg.Parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch p := p.(type) {
		case a2a.TextPart:
			b.WriteString(p.Text)
		case a2a.DataPart:
			j, _ := json.Marshal(p.Data)
			b.Write(j)
		case a2a.FilePart:
			if f, ok := p.File.(a2a.FileURI); ok {
				b.WriteString(f.URI)
			} else {
				b.WriteString("(a file)")
			}
		}
	}
	return b.String()
}

// serveTask is GET TaskPath.
func (c *Console) serveTask(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	id := v.Get("id")
	if id == "" || len(id) > MaxFilterID || !utf8.ValidString(id) {
		writeJSONError(w, http.StatusBadRequest, badRequest("id must be a task id of at most %d bytes", MaxFilterID))
		return
	}
	var after int64
	if s := v.Get("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			writeJSONError(w, http.StatusBadRequest, badRequest("after must be a step's sequence number"))
			return
		}
		after = n
	}
	ctx := r.Context()
	t, err := c.cfg.Tasks.Get(ctx, a2a.TaskID(id))
	if err != nil {
		if errors.Is(err, a2a.ErrTaskNotFound) {
			// An unknown task and one the caller may not see are alike.
			writeJSONError(w, http.StatusNotFound, errors.New("no such task: it is unknown, expired, or not yours to see"))
			return
		}
		writeJSONError(w, http.StatusInternalServerError, err)
		return
	}
	now := time.Now().UTC()
	page := TaskPage{Task: row(t, now), RootID: string(t.ID), History: []Message{}, Artifacts: []Message{}, Steps: []api.Step{}, Seqs: []int64{}}
	for _, m := range t.History {
		if m != nil {
			txt, _ := api.ClipStepText(messageText(m))
			page.History = append(page.History, Message{Role: string(m.Role), Text: txt})
		}
	}
	for _, a := range t.Artifacts {
		if a != nil {
			txt, _ := api.ClipStepText(messageText(&a2a.Message{Parts: a.Parts}))
			page.Artifacts = append(page.Artifacts, Message{Role: a.Name, Text: txt})
		}
	}
	// The tree's root: its parents, each one the caller may see.
	root := t
	for range maxRootHops {
		parent, _ := root.Metadata[api.MetaParentTask].(string)
		if parent == "" {
			break
		}
		p, err := c.cfg.Tasks.Get(ctx, a2a.TaskID(parent))
		if err != nil {
			break
		}
		root = p
	}
	page.RootID = string(root.ID)
	recs, err := c.cfg.Tasks.Steps(ctx, root.ID, after, MaxStepsPage+1)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, err)
		return
	}
	if len(recs) > MaxStepsPage {
		recs = recs[:MaxStepsPage]
		page.NextAfter = recs[len(recs)-1].Seq
	}
	for _, rec := range recs {
		var s api.Step
		if err := json.Unmarshal(rec.Body, &s); err != nil {
			continue
		}
		s.Kind = rec.Kind
		page.Steps = append(page.Steps, s)
		page.Seqs = append(page.Seqs, rec.Seq)
	}
	writeJSON(w, page)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

func writeJSONError(w http.ResponseWriter, status int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
