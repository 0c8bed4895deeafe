package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
)

// A task's steps are deleted with it (here: evicted for room), not only
// hidden: the steps table holds none of them after.
func TestStepsDeletedWithTheirTask(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Options{Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	old := &a2a.Task{ID: "old", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &now}}
	if err := s.Create(ctx, old, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSteps(ctx, "old", []tasks.StepRecord{{Kind: api.StepStart, Body: []byte(`{}`)}, {Kind: api.StepEnd, Body: []byte(`{}`)}}, 1000); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s.r.QueryRow(`SELECT count(*) FROM steps WHERE task_id = 'old'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 2 {
		t.Fatalf("%d steps stored, want 2", n)
	}
	if err := s.Create(ctx, &a2a.Task{ID: "new", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &now}}, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "old"); err == nil {
		t.Fatal("the old task was not evicted")
	}
	if n := count(); n != 0 {
		t.Fatalf("%d steps of an evicted task left", n)
	}
}
