package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/internal/testkit"
)

// listTasks returns the tasks a service holds for an anonymous caller (every
// caller is the same anonymous peer in the loopback development mode), by
// A2A 1.0 ListTasks.
func listTasks(t *testing.T, s *service) []map[string]any {
	t.Helper()
	var page struct {
		Tasks []map[string]any `json:"tasks"`
	}
	if e := rpc(t, s, "1.0", "ListTasks", `{}`, &page); e != nil {
		t.Fatalf("ListTasks: %+v", e)
	}
	return page.Tasks
}

// nestedTask waits until the nested task at path on s is terminal and
// returns it.
func nestedTask(t *testing.T, s *service, path string) *a2a.Task {
	t.Helper()
	id := byChildPath(nestedSpawns(t, s, 1), path)
	if id == "" {
		testkit.WaitFor(t, 20*time.Second, "spawn of "+path, func() bool {
			id = byChildPath(testkit.WithMsg(testkit.JSONLines(s.logs.String()), "subagent spawned"), path)
			return id != ""
		})
	}
	c := s.client(t)
	var task *a2a.Task
	testkit.WaitFor(t, 20*time.Second, "nested task "+path+" final", func() bool {
		var err error
		task, err = c.GetTask(context.Background(), &a2a.TaskQueryParams{ID: id})
		return err == nil && task.Status.State.Terminal()
	})
	return task
}

// A scripted root on A spawns a child with provider=peer:b: B runs it, the
// child's result is the spawn's tool result in the root's transcript, the
// nested task on A says provider peer:b and completed with B's answer and
// usage, and B's usage counts against A's tree (the next local child's token
// grant is what the tree's ceiling has left after it).
func TestNestedSpawnOnPeer(t *testing.T) {
	t.Parallel()
	b := startService(t, "--intelligence", "builtin:script="+writeScript(t, `[default]
usage 3000 1000
answer "b did: {objective}"
`))
	a := startService(t, "--peer", "b="+b.url, "--max-tokens", "10000", "--tree-token-ceiling", "12000",
		"--intelligence", "builtin:script="+writeScript(t, `[depth 0]
usage 0 0
spawn sync "remote work" provider=peer:b
usage 0 0
spawn sync "local after"
usage 0 0
answer "root saw: {transcript}"

[depth 1]
usage 0 0
answer "local child"
`))
	root := sendWithMeta(t, a, "go", nil)
	if root.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("root: %s %v", root.Status.State, root.Status.Message)
	}
	if text := artifactText(root); !strings.Contains(text, `"status":"completed"`) || !strings.Contains(text, "b did: remote work") || !strings.Contains(text, "local child") {
		t.Fatalf("the root's transcript lacks the remote child's result: %q", text)
	}
	remote := nestedTask(t, a, "0.1")
	usage, _ := remote.Metadata["agentd/usage"].(map[string]any)
	if remote.Status.State != a2a.TaskStateCompleted || artifactText(remote) != "b did: remote work" ||
		remote.Metadata["agentd/provider"] != "peer:b" || remote.Metadata["agentd/parent_task"] != string(root.ID) ||
		usage == nil || usage["tokens_in"] != 3000.0 || usage["tokens_out"] != 1000.0 {
		t.Fatalf("nested task 0.1: %s %q %v", remote.Status.State, artifactText(remote), remote.Metadata)
	}
	// B ran the child as a task of its own, and no process of A's did.
	if tasks := listTasks(t, b); len(tasks) != 1 {
		t.Fatalf("B holds %d tasks, want 1", len(tasks))
	}
	for _, r := range testkit.WithMsg(testkit.JSONLines(a.logs.String()), "subagent started") {
		if str(r, "agent_path") == "0.1" {
			t.Fatal("A started a process for the remote child")
		}
	}
	// The ceiling (12000) less B's 4000 tokens: the local child's grant.
	var granted any
	for _, r := range testkit.WithMsg(testkit.JSONLines(a.logs.String()), "subagent spawned") {
		if str(r, "child_path") == "0.2" {
			granted = r["max_tokens"]
		}
	}
	if granted != 8000.0 {
		t.Fatalf("local child after the remote one was granted %v tokens; want 8000 (B's usage folded into the tree)", granted)
	}
}

// A deadline on a spawn to a peer shorter than the peer's work ends the
// child deadline on A, and B sees tasks/cancel (its task ends canceled).
func TestNestedSpawnOnPeerPastItsDeadline(t *testing.T) {
	t.Parallel()
	b := startService(t, "--intelligence", "builtin:script="+writeScript(t, "[default]\nsleep 1h\nanswer \"never\"\n"))
	a := startService(t, "--peer", "b="+b.url, "--intelligence", "builtin:script="+writeScript(t, `[depth 0]
spawn sync "slow remote" provider=peer:b deadline=1s
answer "root saw: {transcript}"
`))
	root := sendWithMeta(t, a, "go", nil)
	if root.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(root), `"status":"deadline"`) {
		t.Fatalf("root: %s %q", root.Status.State, artifactText(root))
	}
	remote := nestedTask(t, a, "0.1")
	if remote.Status.State != a2a.TaskStateFailed || remote.Metadata["agentd/status"] != "deadline" || remote.Metadata["agentd/provider"] != "peer:b" {
		t.Fatalf("nested task 0.1: %s %v", remote.Status.State, remote.Metadata)
	}
	testkit.WaitFor(t, 20*time.Second, "B's task canceled", func() bool {
		tasks := listTasks(t, b)
		if len(tasks) != 1 {
			return false
		}
		st, _ := tasks[0]["status"].(map[string]any)
		return st["state"] == "TASK_STATE_CANCELED"
	})
	for _, pid := range childPIDs(testkit.JSONLines(b.logs.String())) {
		testkit.WaitFor(t, 10*time.Second, "B's subagent gone", func() bool { return testkit.GroupDead(pid) })
	}
}

// A tree that B runs for A's delegation nests only the mesh depth left: A's
// cap is 3 and B's root sits at mesh depth 1, so B's tree stops at its own
// depth 2 although B's --max-depth is 4.
func TestDelegatedTreeNestsOnlyTheRemainingDepth(t *testing.T) {
	t.Parallel()
	b := startService(t, "--intelligence", "builtin:script="+writeScript(t, `[default]
spawn sync "deeper"
answer "{path}: {transcript}"
`))
	a := startService(t, "--peer", "b="+b.url, "--route", "*=peer:b", "--max-depth", "3")
	task := sendWithMeta(t, a, "dig", nil)
	if task.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(task), "spawn denied: max_depth 2 reached") {
		t.Fatalf("A's task: %s %q", task.Status.State, artifactText(task))
	}
	deepest := -1
	for _, r := range testkit.WithMsg(testkit.JSONLines(b.logs.String()), "subagent ended") {
		if d := int(r["depth"].(float64)); d > deepest {
			deepest = d
		}
	}
	if deepest != 2 {
		t.Fatalf("B's deepest subagent is at depth %d, want 2 (mesh depth 3)", deepest)
	}
}
