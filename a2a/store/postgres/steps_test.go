package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/a2a/tasks/storetest"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/pgtest"
)

// A tree's steps written by the replica that runs it are read by another
// (the console's task page through any replica), and leave the table with
// their task (here: evicted for room).
func TestStepsAcrossReplicasAndDeleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.Start(t).Database(t)
	a := open(t, dsn, storetest.Config{Capacity: 1})
	b := open(t, dsn, storetest.Config{Capacity: 1})
	now := time.Now()
	if err := a.Create(ctx, &a2a.Task{ID: "old", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &now}}, ""); err != nil {
		t.Fatal(err)
	}
	if err := a.AddSteps(ctx, "old", []tasks.StepRecord{{Kind: api.StepStart, Body: []byte(`{"n":1}`)}, {Kind: api.StepEnd, Body: []byte(`{"n":2}`)}}, 1000); err != nil {
		t.Fatal(err)
	}
	got, err := b.Steps(ctx, "old", 0, 10)
	if err != nil || len(got) != 2 || string(got[1].Body) != `{"n":2}` {
		t.Fatalf("the other replica read %+v, %v", got, err)
	}
	if err := b.Create(ctx, &a2a.Task{ID: "new", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &now}}, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Get(ctx, "old"); err == nil {
		t.Fatal("the old task was not evicted")
	}
	var n int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM steps WHERE task_id = 'old'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d steps of an evicted task left (%v)", n, err)
	}
}
