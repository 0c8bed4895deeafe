package sqlite

import (
	"context"
	"os"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks/storetest"
)

// Two stores on one directory see each other (Others, with the pid of the
// lock file) and name the runner of each other's unfinished tasks
// (RunnerOf), alive until it closes.
func TestOthersAndRunnerOf(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := open(t, dir, storetest.Config{})
	if others, err := a.Others(); err != nil || len(others) != 0 {
		t.Fatalf("alone: %+v %v", others, err)
	}
	b := open(t, dir, storetest.Config{})
	others, err := a.Others()
	if err != nil || len(others) != 1 || others[0].Instance != b.Instance() || others[0].PID != os.Getpid() {
		t.Fatalf("others of a: %+v %v; want %s (pid %d)", others, err, b.Instance(), os.Getpid())
	}
	task := &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if err := b.Create(ctx, task, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil { // a new task is staged until a sync
		t.Fatal(err)
	}
	if runner, alive, err := a.RunnerOf(ctx, "t1"); err != nil || runner != b.Instance() || !alive {
		t.Fatalf("RunnerOf while b lives: %q %v %v", runner, alive, err)
	}
	if runner, _, err := a.RunnerOf(ctx, "unknown"); err != nil || runner != "" {
		t.Fatalf("RunnerOf an unknown task: %q %v", runner, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if runner, alive, err := a.RunnerOf(ctx, "t1"); err != nil || runner != b.Instance() || alive {
		t.Fatalf("RunnerOf once b closed: %q %v %v", runner, alive, err)
	}
	if others, err := a.Others(); err != nil || len(others) != 0 {
		t.Fatalf("once b closed: %+v %v", others, err)
	}
}
