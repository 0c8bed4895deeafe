package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

func taskAt(id string, state a2a.TaskState, ctxID string, at time.Time) *a2a.Task {
	return &a2a.Task{ID: a2a.TaskID(id), ContextID: ctxID, Status: a2a.TaskStatus{State: state, Timestamp: &at}}
}

// Pages walk every matching task once, newest status first, and a page
// boundary survives tasks being added meanwhile.
func TestStoreListPages(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(100, 0)
	base := time.Now()
	for i := range 7 {
		ctxID := "even"
		if i%2 == 1 {
			ctxID = "odd"
		}
		if err := s.Create(ctx, taskAt(fmt.Sprintf("t%d", i), a2a.TaskStateWorking, ctxID, base.Add(time.Duration(i)*time.Second)), ""); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	token := ""
	for pages := 0; ; pages++ {
		page, err := s.List(ctx, ListQuery{PageSize: 3, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if pages == 0 && page.TotalSize != 7 {
			t.Fatalf("total = %d", page.TotalSize)
		}
		for _, tk := range page.Tasks {
			seen = append(seen, string(tk.ID))
		}
		if pages == 0 {
			// A newer task arrives between pages: it sorts before the cursor,
			// so the walk neither repeats nor skips the older ones.
			s.Create(ctx, taskAt("new", a2a.TaskStateWorking, "even", base.Add(time.Hour)), "")
		}
		if page.NextPageToken == "" {
			break
		}
		token = page.NextPageToken
	}
	want := []string{"t6", "t5", "t4", "t3", "t2", "t1", "t0"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("walk = %v, want %v", seen, want)
	}
	page, _ := s.List(ctx, ListQuery{ContextID: "odd", PageSize: DefaultPageSize})
	if page.TotalSize != 3 || page.NextPageToken != "" {
		t.Fatalf("context filter: %+v", page)
	}
	page, _ = s.List(ctx, ListQuery{UpdatedAfter: base.Add(5500 * time.Millisecond), PageSize: DefaultPageSize})
	if len(page.Tasks) != 2 { // t6 and new
		t.Fatalf("updated-after filter: %d tasks", len(page.Tasks))
	}
	// A task updated at exactly that time is listed (ListTasksRequest's
	// status_timestamp_after is "greater than or equal to").
	page, _ = s.List(ctx, ListQuery{UpdatedAfter: base.Add(5 * time.Second), PageSize: DefaultPageSize})
	if len(page.Tasks) != 3 { // t5, t6 and new
		t.Fatalf("updated-after filter at a task's own timestamp: %d tasks", len(page.Tasks))
	}
	if _, err := s.List(ctx, ListQuery{PageToken: "not-a-token", PageSize: DefaultPageSize}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("bad token: %v", err)
	}
}

func TestStoreListScopesByOwner(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(10, 0)
	now := time.Now()
	s.Create(ctx, taskAt("alice1", a2a.TaskStateWorking, "c", now), "alice")
	s.Create(ctx, taskAt("anon", a2a.TaskStateWorking, "c", now), "")
	if err := s.Create(ctx, taskAt("anon", a2a.TaskStateWorking, "c", now), ""); err == nil {
		t.Fatal("Create replaced an existing task")
	}
	page, _ := s.List(ctx, ListQuery{Owner: "alice", PageSize: DefaultPageSize})
	if len(page.Tasks) != 1 || page.Tasks[0].ID != "alice1" {
		t.Fatalf("alice sees %v", page.Tasks)
	}
	page, _ = s.List(ctx, ListQuery{PageSize: DefaultPageSize})
	if len(page.Tasks) != 1 || page.Tasks[0].ID != "anon" {
		t.Fatalf("an anonymous caller sees %v", page.Tasks)
	}
}

func TestStorePushConfigs(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(2, 0)
	if _, err := s.SetPush(ctx, "missing", PushTarget{}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("push on a missing task: %v", err)
	}
	s.Create(ctx, taskAt("t", a2a.TaskStateWorking, "c", time.Now()), "")
	a, _ := s.SetPush(ctx, "t", PushTarget{Config: a2a.PushConfig{URL: "https://a"}})
	if a.Config.ID == "" {
		t.Fatal("no id generated")
	}
	s.SetPush(ctx, "t", PushTarget{Config: a2a.PushConfig{ID: "b", URL: "https://b"}})
	before, _ := s.ListPush(ctx, "t")
	s.SetPush(ctx, "t", PushTarget{Config: a2a.PushConfig{ID: "b", URL: "https://b2"}})
	if before[1].Config.URL != "https://b" {
		t.Fatal("a listed slice changed under its reader")
	}
	if got, _ := s.GetPush(ctx, "t", "b"); got.Config.URL != "https://b2" {
		t.Fatalf("replace: %+v", got)
	}
	if got, _ := s.GetPush(ctx, "t", ""); got.Config.ID != "b" {
		t.Fatalf("latest: %+v", got)
	}
	if _, err := s.GetPush(ctx, "t", "nope"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("unknown config: %v", err)
	}
	if err := s.DeletePush(ctx, "t", "nope"); err != nil {
		t.Fatalf("deleting an unknown config is not idempotent: %v", err)
	}
	s.DeletePush(ctx, "t", a.Config.ID)
	if list, _ := s.ListPush(ctx, "t"); len(list) != 1 || list[0].Config.ID != "b" {
		t.Fatalf("after delete: %+v", list)
	}
	for i := 0; i < MaxPushConfigs-1; i++ {
		if _, err := s.SetPush(ctx, "t", PushTarget{Config: a2a.PushConfig{URL: "https://x"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SetPush(ctx, "t", PushTarget{Config: a2a.PushConfig{URL: "https://x"}}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Fatalf("config %d accepted: %v", MaxPushConfigs+1, err)
	}
	// Configs go with their task.
	s.Put(ctx, taskAt("t", a2a.TaskStateCompleted, "c", time.Now()))
	s.Create(ctx, taskAt("u", a2a.TaskStateWorking, "c", time.Now()), "")
	s.Create(ctx, taskAt("v", a2a.TaskStateWorking, "c", time.Now()), "")
	if _, err := s.ListPush(ctx, "t"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Fatalf("configs outlived their evicted task: %v", err)
	}
}

func TestStoreBoundedAndEvictsFinishedFirst(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(2, 0)
	live := &a2a.Task{ID: "live", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	done1 := &a2a.Task{ID: "d1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	done2 := &a2a.Task{ID: "d2", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	for _, tk := range []*a2a.Task{live, done1, done2} {
		if err := s.Create(ctx, tk, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Get(ctx, "d1"); err == nil {
		t.Fatal("oldest finished task not evicted")
	}
	if _, _, err := s.Get(ctx, "live"); err != nil {
		t.Fatal("a running task was evicted")
	}
	live2 := &a2a.Task{ID: "live2", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if err := s.Create(ctx, live2, ""); err != nil {
		t.Fatal(err) // evicts d2
	}
	if err := s.Create(ctx, &a2a.Task{ID: "live3", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, ""); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("full of running tasks: %v", err)
	}
}

// TestStoreEvictionForgetsTheMessageKey: an evicted task's idempotency key
// (its first message's id when it was created) goes with it, whatever its
// last snapshot holds (the store keeps the key: eviction reads nothing of
// the task, whose snapshot is cold by then), so the message sent again
// makes a new task; the caller's other tasks keep theirs.
func TestStoreEvictionForgetsTheMessageKey(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(2, 0)
	task := func(id, msg string) *a2a.Task {
		return &a2a.Task{ID: a2a.TaskID(id), Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted},
			History: []*a2a.Message{{ID: msg, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "x"}}}}}
	}
	for _, tk := range []*a2a.Task{task("t1", "m1"), task("t2", "m2")} {
		if err := s.Create(ctx, tk, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	// t1 ends with a snapshot whose history no longer starts with m1.
	if err := s.Put(ctx, &a2a.Task{ID: "t1", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, task("t3", "m3"), "alice"); err != nil { // evicts t1
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "t1"); err == nil {
		t.Fatal("t1 not evicted")
	}
	if len(s.messages) != 2 {
		t.Fatalf("%d idempotency keys held for 2 tasks: %v", len(s.messages), s.messages)
	}
	var dup *DuplicateError
	if err := s.Create(ctx, task("t4", "m2"), "alice"); !errors.As(err, &dup) || dup.Existing != "t2" {
		t.Fatalf("m2 sent again: %v, want a duplicate of t2", err)
	}
}

func TestStoreRetention(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore(10, time.Minute)
	clock := time.Now()
	s.now = func() time.Time { return clock }
	s.Create(ctx, &a2a.Task{ID: "old", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}, "")
	clock = clock.Add(2 * time.Minute)
	s.Create(ctx, &a2a.Task{ID: "new", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, "")
	if _, _, err := s.Get(ctx, "old"); err == nil {
		t.Fatal("a finished task outlived its retention")
	}
}

// BenchmarkStorePut is the hot path: one new snapshot per task event.
func BenchmarkStorePut(b *testing.B) {
	ctx := context.Background()
	s := NewMemoryStore(10000, time.Hour)
	now := time.Now()
	tasks := make([]*a2a.Task, 1000)
	for i := range tasks {
		tasks[i] = taskAt(fmt.Sprint(i), a2a.TaskStateWorking, "c", now)
		s.Create(ctx, tasks[i], "")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := *tasks[i%len(tasks)]
		s.Put(ctx, &t)
	}
}

// One caller's new tasks evict its own oldest finished ones, never another
// caller's finished result while that caller is within its quota (issue 15:
// with --task-capacity 5, five new tasks of one caller evicted another's).
func TestStoreEvictsPerCallerFirst(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStoreLimits(MemoryLimits{Capacity: 5, QuotaTasks: 3})
	done := func(id string) *a2a.Task {
		return &a2a.Task{ID: a2a.TaskID(id), Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	}
	if err := s.Create(ctx, done("bob-result"), "bob"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s.Create(ctx, done(fmt.Sprint("alice-", i)), "alice"); err != nil {
			t.Fatalf("alice's task %d: %v", i, err)
		}
	}
	if _, _, err := s.Get(ctx, "bob-result"); err != nil {
		t.Fatalf("bob's result went to alice's new tasks: %v", err)
	}
	if _, _, err := s.Get(ctx, "alice-1"); err == nil {
		t.Fatal("alice holds more than her quota of 3")
	}
	if _, _, err := s.Get(ctx, "alice-4"); err != nil {
		t.Fatalf("alice's newest task: %v", err)
	}
	// A caller whose quota holds only running tasks is refused, and so is
	// anyone when the store is full of tasks no one may evict.
	s2 := NewMemoryStoreLimits(MemoryLimits{Capacity: 4, QuotaTasks: 2})
	for i := range 2 {
		s2.Create(ctx, &a2a.Task{ID: a2a.TaskID(fmt.Sprint("run-", i)), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, "carol")
		s2.Create(ctx, done(fmt.Sprint("dave-", i)), "dave")
	}
	if err := s2.Create(ctx, done("carol-3"), "carol"); !errors.Is(err, ErrCallerQuota) {
		t.Fatalf("carol over her quota of running tasks: %v", err)
	}
	if n, _, _, _ := s2.Usage(""); n != 4 {
		t.Fatalf("refusals changed the store: %d tasks", n)
	}
	// A new caller's share is 4/3 = 1 (issue 28: erin was refused): dave's
	// oldest, over his share, makes room; carol's running tasks stay.
	if err := s2.Create(ctx, done("erin-0"), "erin"); err != nil {
		t.Fatalf("a new caller with the store full of others' tasks within their quota: %v", err)
	}
	if _, _, err := s2.Get(ctx, "dave-0"); err == nil {
		t.Fatal("dave's oldest, over his share, stayed")
	}
	// The store is now full of tasks within their callers' shares (dave's
	// one, erin's one) or running (carol's): a fourth caller is refused.
	if err := s2.Create(ctx, done("fred-0"), "fred"); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("the store full of running tasks and tasks within their shares: %v", err)
	}
}

// The store is bounded by bytes too: a task's history and artifacts count,
// and finished tasks go to keep the total under the bound.
func TestStoreBoundedByBytes(t *testing.T) {
	ctx := context.Background()
	const mib = 1 << 20
	s := NewMemoryStoreLimits(MemoryLimits{Capacity: 1000, Bytes: 8 * mib})
	big := func(id string, state a2a.TaskState) *a2a.Task {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: strings.Repeat("x", 3*mib)})
		return &a2a.Task{ID: a2a.TaskID(id), History: []*a2a.Message{m}, Status: a2a.TaskStatus{State: state}}
	}
	for i := range 10 {
		if err := s.Create(ctx, big(fmt.Sprint("t", i), a2a.TaskStateCompleted), "alice"); err != nil {
			t.Fatal(err)
		}
		if _, bytes, _, _ := s.Usage(""); bytes > 8*mib {
			t.Fatalf("after task %d the store holds %d bytes", i, bytes)
		}
	}
	if s.Len() != 2 {
		t.Fatalf("%d tasks of 3 MiB in 8 MiB", s.Len())
	}
	// A running task that grows past the bound pushes finished ones out.
	run := &a2a.Task{ID: "run", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if err := s.Create(ctx, run, "alice"); err != nil {
		t.Fatal(err)
	}
	grown := *run
	grown.Artifacts = []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{a2a.TextPart{Text: strings.Repeat("y", 5*mib)}}}}
	if err := s.Put(ctx, &grown); err != nil {
		t.Fatal(err)
	}
	if _, bytes, _, _ := s.Usage(""); bytes > 8*mib || s.Len() != 1 { // 3+5 MiB and the overheads are over 8 MiB
		t.Fatalf("after the growth: %d bytes, %d tasks", bytes, s.Len())
	}
}

// Size counts texts, data and files, and the store sizes a growing history
// by its new messages: the sum matches Size of the whole snapshot.
func TestStoreMeasuresIncrementally(t *testing.T) {
	st := &storedTask{}
	task := &a2a.Task{ID: "t", ContextID: "c"}
	for i := range 5 {
		next := *task
		next.History = append(slices.Clip(task.History), a2a.NewMessage(a2a.MessageRoleUser,
			a2a.TextPart{Text: strings.Repeat("x", 100*i)}, a2a.DataPart{Data: map[string]any{"k": []any{"v", 1.0}}}))
		next.Status.Message = a2a.NewMessage(a2a.MessageRoleAgent, a2a.FilePart{File: a2a.FileBytes{Bytes: "aGVsbG8="}})
		if got, want := st.measure(&next), Size(&next); got != want {
			t.Fatalf("step %d: measured %d, Size %d", i, got, want)
		}
		task = &next
	}
	// A snapshot whose history is not an append of the last is sized whole.
	other := &a2a.Task{ID: "t", History: task.History[:2]}
	if got, want := st.measure(other), Size(other); got != want {
		t.Fatalf("a shorter history: measured %d, Size %d", got, want)
	}
	if Size(task) < 1000 {
		t.Fatalf("Size %d misses the texts", Size(task))
	}
}
