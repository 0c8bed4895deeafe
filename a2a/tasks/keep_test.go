package tasks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
)

// A running task whose large first message the engine left to its SQLite
// store (hollow.go) is written without reading that message back: the
// store keeps it in place (tasks.MessageKeeper), and what callers read,
// while it runs and once it ended, carries it whole, the message's text
// alone read back for it (issue 35: a read-back of the task per write cost
// 3 to 4 times the write itself with a 64 KiB message).
func TestRunningWritesKeepTheStoredMessage(t *testing.T) {
	s, err := openStore(t)
	if err != nil {
		t.Fatal(err)
	}
	e := tasks.NewEngine(s, &scriptExec{hold: true}, nil, tasks.WithWriteDelay(0))
	ctx := context.Background()
	text := strings.Repeat(`a "quoted" \ line <of> the objective, é ✓`+"\n", 2000) // over tasks.HollowAbove
	blocking := false
	res, err := e.OnSendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text}),
		Config: &a2a.MessageSendConfig{Blocking: &blocking}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	whole := func(what string, got *a2a.Task) {
		t.Helper()
		if len(got.History) == 0 {
			t.Fatalf("%s: no history", what)
		}
		if tp, ok := got.History[0].Parts[0].(a2a.TextPart); !ok || tp.Text != text {
			t.Fatalf("%s: the first message's text is not the message's (%d bytes, want %d)", what, len(tp.Text), len(text))
		}
	}
	gets, kept := s.gets.Load(), s.kept.Load()
	const writes = 10
	for i := range writes {
		ev := a2a.NewStatusUpdateEvent(task, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.TextPart{Text: "step"}))
		if i%2 == 1 {
			ev := &a2a.TaskArtifactUpdateEvent{TaskID: task.ID, ContextID: task.ContextID, Artifact: &a2a.Artifact{ID: "a", Parts: a2a.ContentParts{a2a.TextPart{Text: "part"}}}}
			if err := e.Update(ctx, task.ID, ev); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := e.Update(ctx, task.ID, ev); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.gets.Load() - gets + s.kept.Load() - kept; n != 0 {
		t.Fatalf("%d writes of the running task read it back %d times", writes, n)
	}
	stored, _, err := s.Store.Get(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	whole("the stored running task", stored)
	// The last status message is not in the history yet.
	if len(stored.History) != writes/2 || len(stored.Artifacts) != 1 {
		t.Fatalf("stored running task: %d messages, %d artifacts", len(stored.History), len(stored.Artifacts))
	}
	got, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	whole("tasks/get of the running task", got)
	ended, err := e.OnCancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	whole("the cancel's answer", ended)
	// tasks/get of the running task, tasks/cancel's read of it and its
	// end read the message alone back, not the task.
	if n, k := s.gets.Load()-gets, s.kept.Load()-kept; n != 0 || k != 3 {
		t.Fatalf("tasks/get, tasks/cancel and the end read the task %d times and its message %d times, want 0 and 3", n, k)
	}
	got, err = e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("state %s", got.Status.State)
	}
	whole("tasks/get of the ended task", got)
}
