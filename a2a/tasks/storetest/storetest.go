// Package storetest is the conformance suite of tasks.Store: every
// implementation (the memory store, the embedded SQLite store, PostgreSQL)
// runs the same tests with Run, so that the engine sees one behaviour
// whichever store it is given. Stores that are tasks.Durable or
// tasks.PushJournal also run the tests of those interfaces, including a
// reopen of the same storage by a new instance (a restart).
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor/blob"
)

// Config is what a store under test is opened with. The zero value of a field
// is the store's default (for Clock: time.Now).
type Config struct {
	Capacity  int
	Retention time.Duration
	// QuotaTasks bounds the tasks of one caller (0: the store's default,
	// no quota of its own).
	QuotaTasks int
	// Bytes bounds the bytes of the tasks' snapshots and retained payloads
	// (0: none), where the store has such a bound.
	Bytes int64
	// Clock is the store's clock for retention and eviction order.
	Clock func() time.Time
	// AuditKeep and AuditMaxAge bound the audit trail (tasks.Auditor).
	AuditKeep   int
	AuditMaxAge time.Duration
}

// Backend opens the stores of one implementation for the suite.
type Backend struct {
	// Open returns a new, empty store, closed by the test's cleanup.
	Open func(t *testing.T, cfg Config) tasks.Store
	// Reopen, for a durable store, closes s and opens its storage again
	// as the next process would (a new instance, s's gone). Nil for a
	// store whose tasks do not outlive it.
	Reopen func(t *testing.T, s tasks.Store, cfg Config) tasks.Store
}

// Run runs the conformance suite against b.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(*testing.T, Backend)
	}{
		{"CreateGet", testCreateGet},
		{"CreateExisting", testCreateExisting},
		{"PutGetUnknown", testUnknown},
		{"DuplicateMessage", testDuplicateMessage},
		{"ListOrderAndPages", testListPages},
		{"ListFilters", testListFilters},
		{"ListOwners", testListOwners},
		{"ListHistory", testListHistory},
		{"ListBadToken", testListBadToken},
		{"CountByState", testCountByState},
		{"Capacity", testCapacity},
		{"FairShare", testFairShare},
		{"Retention", testRetention},
		{"DuplicateOfExpired", testDuplicateOfExpired},
		{"PushConfigs", testPush},
		{"Concurrent", testConcurrent},
		{"Durable", testDurable},
		{"RetainedPayload", testRetainedPayload},
		{"PushJournal", testJournal},
		{"EndJournal", testEndJournal},
		{"BlobCallers", testBlobCallers},
		{"UnstorableText", testUnstorableText},
		{"Audit", testAudit},
		{"AuditRetention", testAuditRetention},
		{"Steps", testSteps},
		{"StepsExpire", testStepsExpire},
		{"KeepMessage", testKeepMessage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

var ctx = context.Background()

// clock is a settable test clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time                { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) add(d time.Duration)           { c.ns.Add(int64(d)) }
func (c *clock) at(d time.Duration) *time.Time { t := c.now().Add(d); return &t }

// openAs opens a store of b on a clock of its own, as the interface T a
// test needs; the test is skipped, saying why, when the store is not a T.
func openAs[T any](t *testing.T, b Backend, why string) (*clock, tasks.Store, T) {
	t.Helper()
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	v, ok := s.(T)
	if !ok {
		t.Skip(why)
	}
	return c, s, v
}

// task is a task with one user message (its idempotency key) at ts.
func task(id string, state a2a.TaskState, ctxID string, ts time.Time) *a2a.Task {
	return &a2a.Task{
		ID:        a2a.TaskID(id),
		ContextID: ctxID,
		Status:    a2a.TaskStatus{State: state, Timestamp: &ts},
		History: []*a2a.Message{{ID: "msg-" + id, Role: a2a.MessageRoleUser, TaskID: a2a.TaskID(id), ContextID: ctxID,
			Parts: a2a.ContentParts{a2a.TextPart{Text: "do " + id}}}},
	}
}

// rich is a task with every kind of part, artifacts, metadata and a status
// message: what a store must give back exactly.
func rich(id string, ts time.Time) *a2a.Task {
	t := task(id, a2a.TaskStateCompleted, "ctx-rich", ts)
	t.History = append(t.History, &a2a.Message{ID: "m2", Role: a2a.MessageRoleAgent, TaskID: t.ID, ContextID: t.ContextID,
		Parts: a2a.ContentParts{
			a2a.DataPart{Data: map[string]any{"answer": 42.0, "list": []any{"a", "b"}}},
			a2a.FilePart{File: a2a.FileURI{URI: "https://example.test/blobs/1", FileMeta: a2a.FileMeta{Name: "distillate", MimeType: "text/plain"}}},
		}, Metadata: map[string]any{"k": "v"}})
	t.Artifacts = []*a2a.Artifact{{ID: a2a.ArtifactID(id + ".distillate"), Name: "distillate",
		Parts: a2a.ContentParts{a2a.TextPart{Text: "the result, with unicode: é ✓"}}}}
	t.Metadata = map[string]any{api.MetaStatus: "completed", api.MetaUsage: map[string]any{"steps": 3.0, "tokens_in": 10.0}}
	t.Status.Message = &a2a.Message{ID: "m3", Role: a2a.MessageRoleAgent, TaskID: t.ID, ContextID: t.ContextID, Parts: a2a.ContentParts{a2a.TextPart{Text: "done"}}}
	return t
}

// same fails unless got encodes as want does.
func same(t *testing.T, what string, got, want *a2a.Task) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ids(ts []*a2a.Task) string {
	var out []string
	for _, t := range ts {
		out = append(out, string(t.ID))
	}
	return fmt.Sprint(out)
}

func testCreateGet(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	want := rich("t1", c.now())
	must(t, s.Create(ctx, want, "alice"))
	got, owner, err := s.Get(ctx, "t1")
	must(t, err)
	if owner != "alice" {
		t.Fatalf("owner = %q", owner)
	}
	same(t, "created", got, want)
	next := *want
	next.Status = a2a.TaskStatus{State: a2a.TaskStateFailed, Timestamp: c.at(time.Second)}
	next.Artifacts = nil
	must(t, s.Put(ctx, &next))
	got, owner, err = s.Get(ctx, "t1")
	must(t, err)
	same(t, "after Put", got, &next)
	if owner != "alice" {
		t.Fatalf("owner after Put = %q", owner)
	}
}

func testCreateExisting(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	must(t, s.Create(ctx, task("t1", a2a.TaskStateWorking, "c", c.now()), ""))
	again := task("t1", a2a.TaskStateWorking, "c", c.now())
	again.History[0].ID = "another message"
	if err := s.Create(ctx, again, ""); err == nil {
		t.Fatal("a second Create of the same id succeeded")
	}
}

func testUnknown(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	if _, _, err := s.Get(ctx, "nope"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("Get unknown: %v", err)
	}
	if err := s.Put(ctx, task("nope", a2a.TaskStateWorking, "c", c.now())); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("Put unknown: %v", err)
	}
	if _, err := s.SetPush(ctx, "nope", tasks.PushTarget{Config: a2a.PushConfig{URL: "https://x.test/"}}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("SetPush unknown: %v", err)
	}
	if _, err := s.ListPush(ctx, "nope"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("ListPush unknown: %v", err)
	}
	if _, err := s.GetPush(ctx, "nope", ""); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("GetPush unknown: %v", err)
	}
	if err := s.DeletePush(ctx, "nope", "x"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("DeletePush unknown: %v", err)
	}
}

func testDuplicateMessage(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	first := task("t1", a2a.TaskStateWorking, "c", c.now())
	must(t, s.Create(ctx, first, "alice"))
	dup := task("t2", a2a.TaskStateWorking, "c", c.now())
	dup.History[0].ID = first.History[0].ID
	err := s.Create(ctx, dup, "alice")
	var de *tasks.DuplicateError
	if !errors.As(err, &de) || de.Existing != "t1" || de.MessageID != first.History[0].ID {
		t.Fatalf("same caller, same message id: %v", err)
	}
	if _, _, err := s.Get(ctx, "t2"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("the duplicate was stored: %v", err)
	}
	// Another caller's message with the same id is its own.
	must(t, s.Create(ctx, dup, "bob"))
	// A task without messages has no key.
	for _, id := range []string{"n1", "n2"} {
		bare := task(id, a2a.TaskStateWorking, "c", c.now())
		bare.History = nil
		must(t, s.Create(ctx, bare, "alice"))
	}
}

// fill creates n tasks t0..t(n-1), one second apart, alternating contexts
// even/odd, owned by owner.
func fill(t *testing.T, s tasks.Store, c *clock, n int, owner string) {
	t.Helper()
	base := c.now()
	for i := range n {
		ctxID := "even"
		if i%2 == 1 {
			ctxID = "odd"
		}
		must(t, s.Create(ctx, task(fmt.Sprintf("t%d", i), a2a.TaskStateWorking, ctxID, base.Add(time.Duration(i)*time.Second)), owner))
	}
}

func testListPages(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	fill(t, s, c, 7, "")
	var seen []string
	token := ""
	for pages := 0; ; pages++ {
		page, err := s.List(ctx, tasks.ListQuery{PageSize: 3, PageToken: token})
		must(t, err)
		if page.TotalSize != 7+min(pages, 1) || page.PageSize != 3 {
			t.Fatalf("page %d: total %d, size %d", pages, page.TotalSize, page.PageSize)
		}
		for _, tk := range page.Tasks {
			seen = append(seen, string(tk.ID))
		}
		if pages == 0 {
			// A newer task arrives between pages: it sorts before the
			// cursor, so the walk neither repeats nor skips the older ones.
			must(t, s.Create(ctx, task("new", a2a.TaskStateWorking, "even", c.now().Add(time.Hour)), ""))
		}
		if page.NextPageToken == "" {
			break
		}
		token = page.NextPageToken
	}
	if want := "[t6 t5 t4 t3 t2 t1 t0]"; fmt.Sprint(seen) != want {
		t.Fatalf("walk = %v, want %v", seen, want)
	}
	// Ties in the timestamp are broken by id, descending.
	tie := c.now().Add(2 * time.Hour)
	for _, id := range []string{"tie-a", "tie-c", "tie-b"} {
		must(t, s.Create(ctx, task(id, a2a.TaskStateWorking, "tie", tie), ""))
	}
	page, err := s.List(ctx, tasks.ListQuery{ContextID: "tie", PageSize: 2})
	must(t, err)
	if ids(page.Tasks) != "[tie-c tie-b]" || page.NextPageToken == "" {
		t.Fatalf("ties: %s next %q", ids(page.Tasks), page.NextPageToken)
	}
	page, err = s.List(ctx, tasks.ListQuery{ContextID: "tie", PageSize: 2, PageToken: page.NextPageToken})
	must(t, err)
	if ids(page.Tasks) != "[tie-a]" || page.NextPageToken != "" {
		t.Fatalf("ties, page 2: %s next %q", ids(page.Tasks), page.NextPageToken)
	}
}

func testListFilters(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	fill(t, s, c, 6, "")
	done := task("t1", a2a.TaskStateCompleted, "odd", c.now().Add(10*time.Second))
	must(t, s.Put(ctx, done))
	for _, q := range []struct {
		q    tasks.ListQuery
		want string
	}{
		{tasks.ListQuery{ContextID: "odd"}, "[t1 t5 t3]"},
		{tasks.ListQuery{State: a2a.TaskStateCompleted}, "[t1]"},
		{tasks.ListQuery{State: a2a.TaskStateWorking, ContextID: "odd"}, "[t5 t3]"},
		// UpdatedAfter keeps a task updated at exactly that time.
		{tasks.ListQuery{UpdatedAfter: c.now().Add(4 * time.Second)}, "[t1 t5 t4]"},
		{tasks.ListQuery{ContextID: "none"}, "[]"},
		// UpdatedBefore drops a task updated at exactly that time.
		{tasks.ListQuery{UpdatedBefore: c.now().Add(2 * time.Second)}, "[t0]"}, // t1 moved on
		{tasks.ListQuery{UpdatedAfter: c.now().Add(2 * time.Second), UpdatedBefore: c.now().Add(4 * time.Second)}, "[t3 t2]"},
		// Text: the objective's text or the id, ASCII case folded, no
		// character special; hostile text selects nothing and breaks nothing.
		{tasks.ListQuery{Text: "DO T4"}, "[t4]"},
		{tasks.ListQuery{Text: "t3"}, "[t3]"},
		{tasks.ListQuery{Text: "do t", State: a2a.TaskStateCompleted}, "[t1]"},
		{tasks.ListQuery{Text: "%"}, "[]"},
		{tasks.ListQuery{Text: "_"}, "[]"},
		{tasks.ListQuery{Text: "' OR 1=1 --"}, "[]"},
		{tasks.ListQuery{Text: "\x00\u0000"}, "[]"},
		{tasks.ListQuery{Text: "a\x00b"}, "[]"},
		{tasks.ListQuery{Text: "\xff\xfe"}, "[]"},
	} {
		q.q.PageSize = tasks.DefaultPageSize
		page, err := s.List(ctx, q.q)
		must(t, err)
		if got := ids(page.Tasks); got != q.want {
			t.Errorf("List(%+v) = %s, want %s", q.q, got, q.want)
		}
		if page.TotalSize != len(page.Tasks) || page.NextPageToken != "" {
			t.Errorf("List(%+v): total %d next %q", q.q, page.TotalSize, page.NextPageToken)
		}
	}
}

func testListOwners(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	must(t, s.Create(ctx, task("a1", a2a.TaskStateWorking, "c", c.now()), "alice"))
	must(t, s.Create(ctx, task("b1", a2a.TaskStateWorking, "c", c.at(time.Second).UTC()), "bob"))
	must(t, s.Create(ctx, task("n1", a2a.TaskStateWorking, "c", c.at(2*time.Second).UTC()), ""))
	for _, q := range []struct {
		q    tasks.ListQuery
		want string
	}{
		{tasks.ListQuery{Owner: "alice"}, "[a1]"},
		{tasks.ListQuery{Owner: "bob"}, "[b1]"},
		{tasks.ListQuery{Owner: ""}, "[n1]"},
		{tasks.ListQuery{Owner: "alice", AnyOwner: true}, "[n1 b1 a1]"},
		// Caller: an operator's filter by the creator, within what is listed.
		{tasks.ListQuery{AnyOwner: true, Caller: ptr("bob")}, "[b1]"},
		{tasks.ListQuery{AnyOwner: true, Caller: ptr("")}, "[n1]"},
		{tasks.ListQuery{Owner: "alice", Caller: ptr("bob")}, "[]"},
		{tasks.ListQuery{AnyOwner: true, Caller: ptr("' OR ''='")}, "[]"},
		{tasks.ListQuery{AnyOwner: true, Caller: ptr("a\x00")}, "[]"},
	} {
		q.q.PageSize = tasks.DefaultPageSize
		page, err := s.List(ctx, q.q)
		must(t, err)
		if got := ids(page.Tasks); got != q.want || page.TotalSize != len(page.Tasks) {
			t.Errorf("List(%+v) = %s (total %d), want %s", q.q, got, page.TotalSize, q.want)
		}
	}
}

func testListHistory(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	tk := rich("t1", c.now()) // two history messages
	must(t, s.Create(ctx, tk, ""))
	for _, n := range []int{0, 1, 5} {
		page, err := s.List(ctx, tasks.ListQuery{PageSize: 1, HistoryLength: &n})
		must(t, err)
		if got, want := len(page.Tasks[0].History), min(n, 2); got != want {
			t.Errorf("historyLength %d: %d messages, want %d", n, got, want)
		}
		if n == 1 && page.Tasks[0].History[0].ID != "m2" {
			t.Errorf("historyLength 1 kept %s, want the latest (m2)", page.Tasks[0].History[0].ID)
		}
	}
	page, err := s.List(ctx, tasks.ListQuery{PageSize: 1})
	must(t, err)
	same(t, "listed without historyLength", page.Tasks[0], tk)
	got, _, err := s.Get(ctx, "t1")
	must(t, err)
	same(t, "stored task after a trimmed List", got, tk)
}

func testListBadToken(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	fill(t, s, c, 2, "")
	for _, tok := range []string{"garbage!", "bm90LWEtY3Vyc29y"} {
		if _, err := s.List(ctx, tasks.ListQuery{PageSize: 1, PageToken: tok}); !errors.Is(err, a2a.ErrInvalidParams) {
			t.Errorf("token %q: %v", tok, err)
		}
	}
}

func testCountByState(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	fill(t, s, c, 4, "")
	must(t, s.Put(ctx, task("t0", a2a.TaskStateCompleted, "even", c.now())))
	must(t, s.Put(ctx, task("t1", a2a.TaskStateFailed, "odd", c.now())))
	counts, err := s.CountByState(ctx)
	must(t, err)
	want := map[a2a.TaskState]int{a2a.TaskStateWorking: 2, a2a.TaskStateCompleted: 1, a2a.TaskStateFailed: 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("counts = %v, want %v", counts, want)
	}
}

// A full store evicts its oldest finished task for a new one, and refuses a
// new one when every task it holds runs.
func testCapacity(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Capacity: 3, Clock: c.now})
	fill(t, s, c, 3, "")
	if err := s.Create(ctx, task("t3", a2a.TaskStateWorking, "c", c.now()), ""); !errors.Is(err, tasks.ErrStoreFull) {
		t.Fatalf("full of running tasks: %v", err)
	}
	c.add(time.Second)
	must(t, s.Put(ctx, task("t1", a2a.TaskStateCompleted, "odd", c.now())))
	c.add(time.Second)
	must(t, s.Put(ctx, task("t0", a2a.TaskStateCompleted, "even", c.now())))
	c.add(time.Second)
	must(t, s.Create(ctx, task("t3", a2a.TaskStateWorking, "c", c.now()), ""))
	if _, _, err := s.Get(ctx, "t1"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("the task that finished first was not evicted: %v", err)
	}
	for _, id := range []a2a.TaskID{"t0", "t2", "t3"} {
		if _, _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	// An evicted task's message id is free again.
	c.add(time.Second)
	must(t, s.Put(ctx, task("t2", a2a.TaskStateCompleted, "c", c.now())))
	again := task("t9", a2a.TaskStateWorking, "c", c.now())
	again.History[0].ID = "msg-t1"
	must(t, s.Create(ctx, again, ""))
}

// Issue 28: callers within their quota that fill the store lock no one
// out. A caller's fair share is the capacity divided by the callers holding
// tasks, itself counted; what a caller holds beyond it is evicted, oldest
// finished first, for a caller within its share, and what it holds up to
// its share is never evicted for another caller's task.
func testFairShare(t *testing.T, b Backend) {
	c := newClock()
	// The default quota is an eighth of the capacity: eight callers at
	// their quota fill the store with finished tasks.
	s := b.Open(t, Config{Capacity: 80, QuotaTasks: 10, Clock: c.now})
	for o := range 8 {
		for i := range 10 {
			c.add(time.Second)
			id := fmt.Sprintf("o%d-%d", o, i)
			must(t, s.Create(ctx, task(id, a2a.TaskStateCompleted, "c", c.now()), fmt.Sprint("owner", o)))
		}
	}
	// The ninth caller's share is 80/9 = 8 tasks: each of its running
	// tasks takes the place of the oldest finished task of a caller over
	// its share (owner0's two oldest, then owner1's, ...).
	for i := range 8 {
		c.add(time.Second)
		if err := s.Create(ctx, task(fmt.Sprintf("ninth-%d", i), a2a.TaskStateWorking, "c", c.now()), "ninth"); err != nil {
			t.Fatalf("the ninth caller's task %d, within its share: %v", i, err)
		}
	}
	held := func(owner string) int {
		page, err := s.List(ctx, tasks.ListQuery{PageSize: 100, Owner: owner})
		must(t, err)
		return page.TotalSize
	}
	for o := range 8 {
		want := 10
		if o < 4 {
			want = 8
		}
		if n := held(fmt.Sprint("owner", o)); n != want {
			t.Errorf("owner%d holds %d tasks, want %d", o, n, want)
		}
	}
	for _, id := range []a2a.TaskID{"o0-0", "o0-1", "o3-1"} {
		if _, _, err := s.Get(ctx, id); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("%s, the oldest of a caller over its share, is held: %v", id, err)
		}
	}
	if _, _, err := s.Get(ctx, "o0-2"); err != nil {
		t.Errorf("owner0's task within its share was evicted: %v", err)
	}

	// Two callers with capacity 4 have shares of 2: bob's two finished
	// tasks are his, and alice, whose quota of 3 has room, is refused
	// rather than take one of them.
	c2 := newClock()
	s2 := b.Open(t, Config{Capacity: 4, QuotaTasks: 3, Clock: c2.now})
	for i := range 2 {
		c2.add(time.Second)
		must(t, s2.Create(ctx, task(fmt.Sprint("alice-", i), a2a.TaskStateWorking, "c", c2.now()), "alice"))
		must(t, s2.Create(ctx, task(fmt.Sprint("bob-", i), a2a.TaskStateCompleted, "c", c2.now()), "bob"))
	}
	if err := s2.Create(ctx, task("alice-2", a2a.TaskStateWorking, "c", c2.now()), "alice"); !errors.Is(err, tasks.ErrStoreFull) {
		t.Fatalf("alice at her share, bob at his: %v", err)
	}
	for _, id := range []a2a.TaskID{"bob-0", "bob-1"} {
		if _, _, err := s2.Get(ctx, id); err != nil {
			t.Fatalf("%s, within bob's share, went to alice's refused task: %v", id, err)
		}
	}
	// A third caller's share is 4/3 = 1: bob is over it, and his oldest
	// finished task goes.
	must(t, s2.Create(ctx, task("carol-0", a2a.TaskStateWorking, "c", c2.now()), "carol"))
	if _, _, err := s2.Get(ctx, "bob-0"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("bob's oldest, over his share, stayed: %v", err)
	}
}

// A finished task stays for the retention window after it finished, then
// goes (at the latest with the next Create).
func testRetention(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Retention: time.Minute, Clock: c.now})
	fill(t, s, c, 2, "")
	must(t, s.Put(ctx, task("t0", a2a.TaskStateCompleted, "even", c.now())))
	c.add(59 * time.Second)
	must(t, s.Create(ctx, task("t2", a2a.TaskStateWorking, "c", c.now()), ""))
	if _, _, err := s.Get(ctx, "t0"); err != nil {
		t.Fatalf("within the retention window: %v", err)
	}
	c.add(2 * time.Second)
	must(t, s.Create(ctx, task("t3", a2a.TaskStateWorking, "c", c.now()), ""))
	if _, _, err := s.Get(ctx, "t0"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("past the retention window: %v", err)
	}
	if _, _, err := s.Get(ctx, "t1"); err != nil {
		t.Fatalf("a running task expired: %v", err)
	}
	page, err := s.List(ctx, tasks.ListQuery{PageSize: 10, AnyOwner: true})
	must(t, err)
	if page.TotalSize != 3 || ids(page.Tasks) != "[t3 t2 t1]" {
		t.Fatalf("listed after expiry: %s (total %d)", ids(page.Tasks), page.TotalSize)
	}
}

// A message whose task is past the retention window makes a new task, even
// before the store's sweep (at most once a second) has deleted the old one:
// reads no longer see it, so it is no duplicate.
func testDuplicateOfExpired(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Retention: time.Minute, Clock: c.now})
	first := task("t1", a2a.TaskStateWorking, "c", c.now())
	must(t, s.Create(ctx, first, "alice"))
	must(t, s.Put(ctx, task("t1", a2a.TaskStateCompleted, "c", c.now())))
	c.add(59*time.Second + 500*time.Millisecond)
	must(t, s.Create(ctx, task("t2", a2a.TaskStateWorking, "c", c.now()), "alice")) // the sweep runs now: t1 stays
	c.add(600 * time.Millisecond)                                                   // t1 expires, the next sweep is not due
	again := task("t3", a2a.TaskStateWorking, "c", c.now())
	again.History[0].ID = first.History[0].ID
	if err := s.Create(ctx, again, "alice"); err != nil {
		t.Fatalf("the message of an expired task: %v, want a new task", err)
	}
	if got, _, err := s.Get(ctx, "t3"); err != nil || got.ID != "t3" {
		t.Fatalf("the new task: %v %v", got, err)
	}
	// The new task is the message's now.
	dup := task("t4", a2a.TaskStateWorking, "c", c.now())
	dup.History[0].ID = first.History[0].ID
	var de *tasks.DuplicateError
	if err := s.Create(ctx, dup, "alice"); !errors.As(err, &de) || de.Existing != "t3" {
		t.Fatalf("the message sent again: %v, want a duplicate of t3", err)
	}
}

func testPush(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Clock: c.now})
	must(t, s.Create(ctx, task("t1", a2a.TaskStateWorking, "c", c.now()), ""))
	list, err := s.ListPush(ctx, "t1")
	must(t, err)
	if len(list) != 0 {
		t.Fatalf("a new task has webhooks: %v", list)
	}
	if _, err := s.GetPush(ctx, "t1", ""); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("GetPush with none: %v", err)
	}
	gen, err := s.SetPush(ctx, "t1", tasks.PushTarget{Config: a2a.PushConfig{URL: "https://a.test/hook", Token: "tok"}, Version: tasks.Version10})
	must(t, err)
	if gen.Config.ID == "" || gen.Config.URL != "https://a.test/hook" || gen.Version != tasks.Version10 {
		t.Fatalf("generated: %+v", gen)
	}
	auth := &a2a.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: "secret"}
	setPush(t, s, "t1", tasks.PushTarget{Config: a2a.PushConfig{ID: "b", URL: "https://b.test/hook", Auth: auth}, Version: tasks.Version03})
	// Replacing keeps the registration order.
	setPush(t, s, "t1", tasks.PushTarget{Config: a2a.PushConfig{ID: gen.Config.ID, URL: "https://a2.test/hook"}, Version: tasks.Version10})
	list, err = s.ListPush(ctx, "t1")
	must(t, err)
	if len(list) != 2 || list[0].Config.URL != "https://a2.test/hook" || list[1].Config.ID != "b" {
		t.Fatalf("list = %+v", list)
	}
	if list[1].Config.Auth == nil || list[1].Config.Auth.Credentials != "secret" || list[1].Version != tasks.Version03 {
		t.Fatalf("the auth info or version was not kept: %+v", list[1])
	}
	latest, err := s.GetPush(ctx, "t1", "")
	must(t, err)
	if latest.Config.ID != "b" {
		t.Fatalf("GetPush \"\" = %s, want the latest registered (b)", latest.Config.ID)
	}
	if _, err := s.GetPush(ctx, "t1", "zzz"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("GetPush unknown config: %v", err)
	}
	must(t, s.DeletePush(ctx, "t1", "b"))
	must(t, s.DeletePush(ctx, "t1", "b"))
	list, err = s.ListPush(ctx, "t1")
	must(t, err)
	if len(list) != 1 {
		t.Fatalf("after delete: %+v", list)
	}
	for i := len(list); i < tasks.MaxPushConfigs; i++ {
		setPush(t, s, "t1", tasks.PushTarget{Config: a2a.PushConfig{ID: fmt.Sprint("c", i), URL: "https://c.test/"}})
	}
	if _, err := s.SetPush(ctx, "t1", tasks.PushTarget{Config: a2a.PushConfig{ID: "one-too-many", URL: "https://c.test/"}}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("webhook %d: %v", tasks.MaxPushConfigs+1, err)
	}
	// Replacing one at the limit is allowed.
	setPush(t, s, "t1", tasks.PushTarget{Config: a2a.PushConfig{ID: "c3", URL: "https://c3.test/"}})
}

func setPush(t *testing.T, s tasks.Store, id a2a.TaskID, target tasks.PushTarget) {
	t.Helper()
	_, err := s.SetPush(ctx, id, target)
	must(t, err)
}

func testConcurrent(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Capacity: 1000, Clock: c.now})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				id := fmt.Sprintf("w%d-%d", w, i)
				tk := task(id, a2a.TaskStateWorking, "c", c.now())
				if err := s.Create(ctx, tk, "o"); err != nil {
					errs <- err
					return
				}
				done := *tk
				done.Status.State = a2a.TaskStateCompleted
				if err := s.Put(ctx, &done); err != nil {
					errs <- err
					return
				}
				if _, _, err := s.Get(ctx, tk.ID); err != nil {
					errs <- err
					return
				}
				if _, err := s.List(ctx, tasks.ListQuery{Owner: "o", PageSize: 5}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// The same message from many goroutines creates one task.
	var created atomic.Int32
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := task(fmt.Sprint("dup", i), a2a.TaskStateWorking, "c", c.now())
			tk.History[0].ID = "the-same-message"
			err := s.Create(ctx, tk, "o")
			var de *tasks.DuplicateError
			switch {
			case err == nil:
				created.Add(1)
			case !errors.As(err, &de):
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if created.Load() != 1 {
		t.Fatalf("one message created %d tasks", created.Load())
	}
	counts, err := s.CountByState(ctx)
	must(t, err)
	if counts[a2a.TaskStateCompleted] != 160 || counts[a2a.TaskStateWorking] != 1 {
		t.Fatalf("counts = %v", counts)
	}
}

func testDurable(t *testing.T, b Backend) {
	c, s, d := openAs[tasks.Durable](t, b, "not a durable store")
	if b.Reopen == nil {
		t.Fatal("a durable store's backend needs Reopen")
	}
	first := d.Instance()
	done := rich("done", c.now())
	must(t, s.Create(ctx, done, "alice"))
	setPush(t, s, "done", tasks.PushTarget{Config: a2a.PushConfig{ID: "h", URL: "https://h.test/"}, Version: tasks.Version10})
	run := task("running", a2a.TaskStateWorking, "c", c.at(time.Second).UTC())
	must(t, s.Create(ctx, run, "alice"))
	must(t, d.Retain(ctx, "running", []byte(`{"payload":1}`)))
	must(t, d.Retain(ctx, "running", []byte(`{"payload":2}`)))
	sub := task("submitted", a2a.TaskStateSubmitted, "c", c.at(2*time.Second).UTC())
	must(t, s.Create(ctx, sub, ""))
	if p, err := d.Retained(ctx, "submitted"); err != nil || p != nil {
		t.Fatalf("Retained without Retain: %q %v", p, err)
	}
	orphans, err := d.Orphans(ctx)
	must(t, err)
	if len(orphans) != 0 {
		t.Fatalf("a live store's own tasks are orphans: %v", orphans)
	}

	s2 := b.Reopen(t, s, Config{Clock: c.now})
	d2 := s2.(tasks.Durable)
	if d2.Instance() == first || d2.Instance() == "" {
		t.Fatalf("instance after reopen: %q (was %q)", d2.Instance(), first)
	}
	got, owner, err := s2.Get(ctx, "done")
	must(t, err)
	same(t, "a finished task after reopen", got, done)
	if owner != "alice" {
		t.Fatalf("owner after reopen: %q", owner)
	}
	hooks, err := s2.ListPush(ctx, "done")
	must(t, err)
	if len(hooks) != 1 || hooks[0].Config.URL != "https://h.test/" || hooks[0].Version != tasks.Version10 {
		t.Fatalf("webhooks after reopen: %+v", hooks)
	}
	p, err := d2.Retained(ctx, "running")
	must(t, err)
	if string(p) != `{"payload":2}` {
		t.Fatalf("retained payload after reopen: %q", p)
	}
	orphans, err = d2.Orphans(ctx)
	must(t, err)
	if len(orphans) != 2 || orphans[0].Task.ID != "running" || orphans[1].Task.ID != "submitted" || orphans[0].Runner != first {
		t.Fatalf("orphans = %+v", orphans)
	}
	same(t, "an orphan's snapshot", orphans[0].Task, run)
	ok, err := d2.Claim(ctx, "running", first)
	must(t, err)
	if !ok {
		t.Fatal("Claim of an orphan failed")
	}
	if ok, err := d2.Claim(ctx, "running", first); err != nil || ok {
		t.Fatalf("a second Claim: %v %v", ok, err)
	}
	orphans, err = d2.Orphans(ctx)
	must(t, err)
	if len(orphans) != 1 || orphans[0].Task.ID != "submitted" {
		t.Fatalf("orphans after a claim = %+v", orphans)
	}
	// A finished orphan is no orphan.
	fin := *sub
	fin.Status = a2a.TaskStatus{State: a2a.TaskStateFailed, Timestamp: c.at(3 * time.Second)}
	must(t, s2.Put(ctx, &fin))
	orphans, err = d2.Orphans(ctx)
	must(t, err)
	if len(orphans) != 0 {
		t.Fatalf("orphans after the last finished = %+v", orphans)
	}
	// The idempotency keys survive too.
	again := task("again", a2a.TaskStateWorking, "c", c.now())
	again.History[0].ID = done.History[0].ID
	var de *tasks.DuplicateError
	if err := s2.Create(ctx, again, "alice"); !errors.As(err, &de) || de.Existing != "done" {
		t.Fatalf("a message sent before the reopen: %v", err)
	}
	// A reopened store's new task is its own, not an orphan of the next.
	must(t, s2.Create(ctx, task("mine", a2a.TaskStateWorking, "c", c.now()), ""))
	s3 := b.Reopen(t, s2, Config{Clock: c.now})
	orphans, err = s3.(tasks.Durable).Orphans(ctx)
	must(t, err)
	if len(orphans) != 2 || orphans[0].Task.ID != "running" || orphans[0].Runner != d2.Instance() {
		t.Fatalf("orphans of the second instance = %+v", orphans)
	}
}

// A task's retained payload (its spawn request, which repeats its message)
// counts once against the byte bound beside its snapshot, not on top of it,
// and is cleared when the task ends: recovery reruns only unfinished tasks.
func testRetainedPayload(t *testing.T, b Backend) {
	const n = 100 << 10 // each task's message; its snapshot is a little more
	c := newClock()
	s := b.Open(t, Config{Clock: c.now, Bytes: 5 * n / 2})
	d, ok := s.(tasks.Durable)
	if !ok {
		t.Skip("not a durable store")
	}
	big := func(id string) *a2a.Task {
		tk := task(id, a2a.TaskStateWorking, "c", c.now())
		tk.History[0].Parts = a2a.ContentParts{a2a.TextPart{Text: strings.Repeat("x", n)}}
		return tk
	}
	a := big("a")
	must(t, s.Create(ctx, a, "alice"))
	must(t, d.Retain(ctx, "a", []byte(strings.Repeat("p", n))))
	// a counts about n, so another task of n fits in 2.5n; a counted twice
	// (2n) would leave no room, nothing finished to evict.
	if err := s.Create(ctx, big("b"), "alice"); err != nil {
		t.Fatalf("a second task beside one with a retained payload: %v (the payload counted on top of its snapshot)", err)
	}
	p, err := d.Retained(ctx, "a")
	must(t, err)
	if len(p) != n {
		t.Fatalf("the running task's payload: %d bytes", len(p))
	}
	end := *a
	end.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: c.at(time.Second)}
	must(t, s.Put(ctx, &end))
	if p, err := d.Retained(ctx, "a"); err != nil || p != nil {
		t.Fatalf("a finished task's payload: %d bytes, %v; want none", len(p), err)
	}
	got, _, err := s.Get(ctx, "a")
	must(t, err)
	same(t, "the finished task", got, &end)
}

func testJournal(t *testing.T, b Backend) {
	c, s, j := openAs[tasks.PushJournal](t, b, "no push journal")
	must(t, s.Create(ctx, task("t1", a2a.TaskStateWorking, "c", c.now()), ""))
	var seqs []int64
	for i := range 3 {
		seq, err := j.AddPending(ctx, tasks.PendingPush{TaskID: "t1", Snapshot: []byte(fmt.Sprintf(`{"n":%d}`, i)), Event: []byte(`{"e":1}`), Final: i == 2})
		must(t, err)
		if len(seqs) > 0 && seq <= seqs[len(seqs)-1] {
			t.Fatalf("sequence numbers do not increase: %v then %d", seqs, seq)
		}
		seqs = append(seqs, seq)
	}
	must(t, j.DonePending(ctx, seqs[0]))
	must(t, j.DonePending(ctx, seqs[0]))
	if b.Reopen != nil {
		s = b.Reopen(t, s, Config{Clock: c.now})
		j = s.(tasks.PushJournal)
	}
	pending, err := j.Pending(ctx)
	must(t, err)
	if len(pending) != 2 || pending[0].Seq != seqs[1] || string(pending[0].Snapshot) != `{"n":1}` || string(pending[0].Event) != `{"e":1}` ||
		pending[0].TaskID != "t1" || pending[0].Final || !pending[1].Final {
		t.Fatalf("pending = %+v", pending)
	}
}

// testEndJournal: a terminal write through PutEnd journals the end of a task
// with webhooks in its own transaction (after the events journaled before
// it), and nothing for a task without; the entry outlives the store's
// process.
func testEndJournal(t *testing.T, b Backend) {
	c, s, j := openAs[tasks.EndJournal](t, b, "no end journal")
	for _, id := range []a2a.TaskID{"hooked", "bare"} {
		must(t, s.Create(ctx, task(string(id), a2a.TaskStateWorking, "c", c.now()), ""))
	}
	if _, err := s.SetPush(ctx, "hooked", tasks.PushTarget{Config: a2a.PushConfig{URL: "https://a.test/hook"}}); err != nil {
		t.Fatal(err)
	}
	before, err := j.AddPending(ctx, tasks.PendingPush{TaskID: "hooked", Snapshot: []byte(`{"n":1}`), Event: []byte(`{"e":1}`)})
	must(t, err)
	c.add(time.Second)
	done := rich("hooked", c.now())
	seq, err := j.PutEnd(ctx, done)
	must(t, err)
	if seq <= before {
		t.Fatalf("the end's entry is %d, after %d", seq, before)
	}
	if seq, err := j.PutEnd(ctx, task("bare", a2a.TaskStateFailed, "c", c.now())); err != nil || seq != 0 {
		t.Fatalf("PutEnd of a task without webhooks = %d, %v; want 0, nil", seq, err)
	}
	if _, err := j.PutEnd(ctx, task("nope", a2a.TaskStateFailed, "c", c.now())); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("PutEnd of an unknown task: %v", err)
	}
	if got, _, err := s.Get(ctx, "hooked"); err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("after PutEnd: %v, %v", got, err)
	}
	if b.Reopen != nil {
		s = b.Reopen(t, s, Config{Clock: c.now})
		j = s.(tasks.EndJournal)
	}
	pending, err := j.Pending(ctx)
	must(t, err)
	if len(pending) != 2 || pending[0].Seq != before || pending[1].Seq != seq {
		t.Fatalf("pending = %+v, want entries %d and %d", pending, before, seq)
	}
	end := pending[1]
	if end.TaskID != "hooked" || !end.Final || len(end.Event) != 0 {
		t.Fatalf("the end's entry = %+v", end)
	}
	var snap a2a.Task
	if err := json.Unmarshal(end.Snapshot, &snap); err != nil || snap.ID != "hooked" || snap.Status.State != a2a.TaskStateCompleted || len(snap.Artifacts) != 1 {
		t.Fatalf("the end's snapshot %s: %v", end.Snapshot, err)
	}
}

// blobBackend is a durable store's side of the supervisor's stored
// distillates.
type blobBackend interface {
	SaveBlob(ctx context.Context, b blob.Stored) error
	BlobIndex(ctx context.Context) ([]blob.Stored, error)
}

// testBlobCallers: a stored distillate comes back with the caller of its
// root task, whose blob quota it counts against after a restart (the
// anonymous caller once the task is gone).
func testBlobCallers(t *testing.T, b Backend) {
	c, s, bb := openAs[blobBackend](t, b, "no blob backend")
	must(t, s.Create(ctx, task("root", a2a.TaskStateWorking, "c", c.now()), "alice"))
	for _, owner := range []string{"root", "gone"} {
		must(t, bb.SaveBlob(ctx, blob.Stored{Blob: blob.Blob{ID: "blob-" + owner, Owner: owner, MediaType: "text/plain", Content: []byte("x"), Created: c.now()}}))
	}
	index, err := bb.BlobIndex(ctx)
	must(t, err)
	callers := map[string]string{}
	for _, sb := range index {
		callers[sb.Owner] = sb.Caller
	}
	if len(callers) != 2 || callers["root"] != "alice" || callers["gone"] != "" {
		t.Fatalf("the distillates' callers: %v", callers)
	}
}

// A tree's steps: kept in order and paged by sequence number, within the
// byte budget (the first step past it a StepDropped marker, the rest not
// kept), none for an unknown task, and gone with their task.
func testSteps(t *testing.T, b Backend) {
	c, s, ss := openAs[tasks.StepStore](t, b, "the store keeps no steps")
	_ = s
	rec := func(kind, body string) tasks.StepRecord { return tasks.StepRecord{Kind: kind, Body: []byte(body)} }
	must(t, ss.AddSteps(ctx, "nobody", []tasks.StepRecord{rec(api.StepStart, `{"kind":"start"}`)}, 1000))
	if got, err := ss.Steps(ctx, "nobody", 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("steps of an unknown task: %v, %v", got, err)
	}
	must(t, s.Create(ctx, task("t0", a2a.TaskStateWorking, "c", c.now()), ""))
	must(t, s.Create(ctx, task("t1", a2a.TaskStateWorking, "c", c.now()), ""))
	must(t, ss.AddSteps(ctx, "t0", []tasks.StepRecord{rec(api.StepStart, `{"n":1}`), rec(api.StepModel, `{"n":2}`)}, 40))
	must(t, ss.AddSteps(ctx, "t1", []tasks.StepRecord{rec(api.StepStart, `{"other":true}`)}, 40))
	must(t, ss.AddSteps(ctx, "t0", []tasks.StepRecord{rec(api.StepTool, `{"n":3}`)}, 40))
	// 3 steps of 7 bytes: 21; the next 21 bytes pass 40.
	must(t, ss.AddSteps(ctx, "t0", []tasks.StepRecord{rec(api.StepTool, `{"n":4,"pad":"xxxxxxxx"}`), rec(api.StepEnd, `{"n":5}`)}, 40))
	must(t, ss.AddSteps(ctx, "t0", []tasks.StepRecord{rec(api.StepEnd, `{"n":6}`)}, 40))
	got, err := ss.Steps(ctx, "t0", 0, 100)
	must(t, err)
	var line []string
	for i, r := range got {
		if r.Seq != int64(i+1) {
			t.Fatalf("step %d has seq %d", i, r.Seq)
		}
		line = append(line, r.Kind+" "+string(r.Body))
	}
	want := `start {"n":1}|model {"n":2}|tool {"n":3}|dropped {"kind":"dropped"}`
	if strings.Join(line, "|") != want {
		t.Fatalf("steps:\n got %s\nwant %s", strings.Join(line, "|"), want)
	}
	page, err := ss.Steps(ctx, "t0", 1, 2)
	must(t, err)
	if len(page) != 2 || page[0].Seq != 2 || page[1].Seq != 3 {
		t.Fatalf("steps after 1, 2 of them: %+v", page)
	}
	if page, _ := ss.Steps(ctx, "t1", 0, 10); len(page) != 1 || string(page[0].Body) != `{"other":true}` {
		t.Fatalf("another tree's steps: %+v", page)
	}
	if page, _ := ss.Steps(ctx, "t0", 4, 10); len(page) != 0 {
		t.Fatalf("steps past the last: %+v", page)
	}
}

// A task's steps go with it (here: past the retention window).
func testStepsExpire(t *testing.T, b Backend) {
	c := newClock()
	s := b.Open(t, Config{Retention: time.Minute, Clock: c.now})
	ss, ok := s.(tasks.StepStore)
	if !ok {
		t.Skip("the store keeps no steps")
	}
	must(t, s.Create(ctx, task("t0", a2a.TaskStateWorking, "c", c.now()), ""))
	must(t, ss.AddSteps(ctx, "t0", []tasks.StepRecord{{Kind: api.StepStart, Body: []byte(`{}`)}}, 1000))
	must(t, s.Put(ctx, task("t0", a2a.TaskStateCompleted, "c", c.now())))
	if got, _ := ss.Steps(ctx, "t0", 0, 10); len(got) != 1 {
		t.Fatalf("steps of a finished task: %+v", got)
	}
	c.add(2 * time.Minute)
	must(t, s.Create(ctx, task("t1", a2a.TaskStateWorking, "c", c.now()), ""))
	if got, err := ss.Steps(ctx, "t0", 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("steps of an expired task: %+v, %v", got, err)
	}
}

func ptr(s string) *string { return &s }
