package a2abind

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/tasks"
)

func TestTreeObserverMirrorsNestedSubagents(t *testing.T) {
	obs := &TreeObserver{}
	cancelled := make(chan string, 1)
	exec := NewExecutor(ExecutorConfig{CancelHandle: func(handle, reason string) bool {
		cancelled <- handle
		return true
	}})
	e := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), exec, nil)
	obs.NodeAdmitted(supervisor.NodeInfo{Handle: "early", RootHandle: "root", ParentHandle: "root"}) // no engine yet: ignored
	obs.Attach(e)
	if err := e.OpenTask(context.Background(), &a2a.Task{ID: "root", ContextID: "ctx-1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, ""); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	get := func(id a2a.TaskID) *a2a.Task {
		t.Helper()
		task, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: id})
		if err != nil {
			t.Fatalf("tasks/get %s: %v", id, err)
		}
		return task
	}
	if _, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: "early"}); err == nil {
		t.Fatal("a task was opened without an engine")
	}

	// The root is the executor's: the observer leaves it alone.
	obs.NodeStarted(supervisor.NodeInfo{Handle: "root", RootHandle: "root", AgentPath: "0"})
	obs.NodeFinished(supervisor.NodeInfo{Handle: "root", RootHandle: "root", AgentPath: "0"}, api.SubagentResult{Status: api.StatusCompleted})
	if got := get("root"); got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("root touched by the observer: %s", got.Status.State)
	}

	child := supervisor.NodeInfo{Handle: "child", RootHandle: "root", ParentHandle: "root", RunID: "run-1", AgentPath: "0.1",
		Objective: "look", Provider: "local", Disposition: api.DispositionAsync, State: supervisor.StateStarting}
	obs.NodeAdmitted(child)
	task := get("child")
	if task.Status.State != a2a.TaskStateSubmitted || task.ContextID != "ctx-1" || task.Metadata[MetaParentTask] != "root" ||
		task.Metadata[MetaAgentPath] != "0.1" || task.Metadata[MetaDisposition] != "async" || task.Metadata[MetaRunID] != "run-1" {
		t.Fatalf("admitted: %+v", task)
	}
	obs.NodeStarted(child) // idempotent
	obs.NodeProgress(child)
	if get("child").Status.State != a2a.TaskStateSubmitted {
		t.Fatal("working before the subagent had its payload")
	}
	child.State = supervisor.StateRunning
	obs.NodeProgress(child)
	obs.NodeProgress(child)
	if task := get("child"); task.Status.State != a2a.TaskStateWorking {
		t.Fatalf("running: %s", task.Status.State)
	}
	obs.NodeFinished(child, api.SubagentResult{Status: api.StatusExhaustedTokens, Distillate: api.InlineText("partial"), Usage: api.Usage{TokensIn: 9}})
	task = get("child")
	if task.Status.State != a2a.TaskStateFailed || task.Metadata[MetaStatus] != "exhausted_tokens" || len(task.Artifacts) != 1 ||
		task.Artifacts[0].ID != ArtifactID("child") || task.Artifacts[0].Parts[0].(a2a.TextPart).Text != "partial" {
		t.Fatalf("finished: %+v", task)
	}

	// tasks/cancel on a nested task reaches the supervisor by handle and
	// returns once the subagent's end is recorded.
	leaf := supervisor.NodeInfo{Handle: "leaf", RootHandle: "root", ParentHandle: "child", AgentPath: "0.1.1", State: supervisor.StateRunning}
	obs.NodeStarted(leaf)
	go func() {
		if h := <-cancelled; h == "leaf" {
			obs.NodeFinished(leaf, api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText("")})
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, err := e.OnCancelTask(cctx, &a2a.TaskIDParams{ID: "leaf"})
	if err != nil || got.Status.State != a2a.TaskStateCanceled || got.Metadata[MetaParentTask] != "child" {
		t.Fatalf("cancel: %+v %v", got, err)
	}
}
