package tasks

import (
	"context"
	"errors"
	"fmt"
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
