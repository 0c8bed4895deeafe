package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/internal/testkit"
)

func str(rec map[string]any, k string) string { s, _ := rec[k].(string); return s }

// childPIDs returns the pid of every subagent that logged its start.
func childPIDs(recs []map[string]any) []int {
	var out []int
	for _, r := range testkit.WithMsg(recs, "subagent started") {
		if pid, ok := r["pid"].(float64); ok {
			out = append(out, int(pid))
		}
	}
	return out
}

func writeScript(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.txt")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A script that spawns recursively and forever: the run ends, no more than
// max_total_subagents ever existed, none deeper than max_depth, each refusal
// is a tool result in some parent's transcript, and no process is left.
func TestScriptRecursiveSpawnForever(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "[default]\nspawn sync \"again\"\nrepeat\n")
	// --log-content: the refusals are read from the tool results the scripts
	// log.
	cmd := agentdCommand(t, "run", "--log-content", "--intelligence", "builtin:script="+script,
		"--max-depth", "3", "--max-children", "3", "--max-total-subagents", "20",
		"--spawn-burst", "100", "--spawn-rate", "100", "--max-steps", "12", "--max-repeats", "100", "--instruction", "go")
	var stderr testkit.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit = %v, want 3 (the root ran out of steps)\n%s", err, stderr.String())
	}
	recs := testkit.JSONLines(stderr.String())
	ended := testkit.WithMsg(recs, "subagent ended")
	if len(ended) == 0 || len(ended) > 20 {
		t.Fatalf("%d subagents existed, want 1..20", len(ended))
	}
	paths := map[string]bool{}
	for _, r := range ended {
		p := str(r, "agent_path")
		paths[p] = true
		if d := strings.Count(p, "."); d > 3 || r["depth"].(float64) != float64(d) {
			t.Fatalf("subagent %s at depth %v, cap 3", p, r["depth"])
		}
	}
	if len(paths) != len(ended) {
		t.Fatalf("agent paths are not unique: %d paths, %d subagents", len(paths), len(ended))
	}
	seen := map[string]string{}
	for _, r := range testkit.WithMsg(recs, "script observed") {
		if r["is_error"] == true {
			seen[str(r, "text")] = str(r, "agent_path")
		}
	}
	for _, want := range []string{
		"spawn denied: max_depth 3 reached",
		"spawn denied: node child cap reached",
		"spawn denied: tree subagent cap reached",
	} {
		if _, ok := seen[want]; !ok {
			t.Errorf("no transcript holds the refusal %q; refusals seen: %v", want, seen)
		}
	}
	pids := childPIDs(recs)
	if len(pids) != len(ended) {
		t.Fatalf("%d children logged a start, %d ended", len(pids), len(ended))
	}
	for _, pid := range pids {
		if testkit.Alive(pid) {
			t.Errorf("subagent process %d outlived the run", pid)
		}
	}
}

// nestedSpawns waits until the service has logged n spawns and returns their
// records.
func nestedSpawns(t *testing.T, s *service, n int) []map[string]any {
	t.Helper()
	var spawns []map[string]any
	testkit.WaitFor(t, 20*time.Second, fmt.Sprintf("%d nested spawns", n), func() bool {
		spawns = testkit.WithMsg(testkit.JSONLines(s.logs.String()), "subagent spawned")
		return len(spawns) >= n
	})
	return spawns
}

func byChildPath(spawns []map[string]any, path string) a2a.TaskID {
	for _, r := range spawns {
		if str(r, "child_path") == path {
			return a2a.TaskID(str(r, "child_task_id"))
		}
	}
	return ""
}

// builtin:demo answers each line of a several-line objective by one child,
// run in parallel; each child is an A2A task of the same context.
func TestDemoFanOutIsNestedTasks(t *testing.T) {
	t.Parallel()
	s := startService(t)
	c := s.client(t)
	ctx := context.Background()
	res, err := c.SendMessage(ctx, textMessage("alpha beta\ngamma\ndelta epsilon zeta"))
	if err != nil {
		t.Fatal(err)
	}
	root := res.(*a2a.Task)
	want := "1. \"alpha beta\" has 2 words and 10 characters\n2. \"gamma\" has 1 words and 5 characters\n3. \"delta epsilon zeta\" has 3 words and 18 characters"
	if root.Status.State != a2a.TaskStateCompleted || artifactText(root) != want {
		t.Fatalf("root %s: %q", root.Status.State, artifactText(root))
	}
	spawns := nestedSpawns(t, s, 3)
	for i, line := range []string{"alpha beta", "gamma", "delta epsilon zeta"} {
		path := fmt.Sprintf("0.%d", i+1)
		id := byChildPath(spawns, path)
		var task *a2a.Task
		testkit.WaitFor(t, 10*time.Second, "nested task "+path+" final", func() bool {
			task, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
			return err == nil && task.Status.State.Terminal()
		})
		if task.Status.State != a2a.TaskStateCompleted || task.ContextID != root.ContextID ||
			task.Metadata["agentd/parent_task"] != string(root.ID) || task.Metadata["agentd/agent_path"] != path ||
			task.Metadata["agentd/disposition"] != "async" || !strings.HasPrefix(artifactText(task), fmt.Sprintf("%q has", line)) {
			t.Fatalf("nested task %s: %+v, artifact %q", path, task, artifactText(task))
		}
	}
}

const treeScript = `# root -> 0.1 (async) -> 0.1.1 (sync), which sleeps until stopped
[depth 0]
spawn async "middle"
await
answer "root saw: {results}"

[depth 1]
spawn sync "leaf"
answer "middle done"

[depth 2]
sleep 1h
answer "never"
`

// tasks/get works on a nested handle while it runs and after; tasks/cancel on
// a nested parent leaves no process of its subtree and the root goes on; on a
// root it takes the whole tree.
func TestNestedTasksGetAndCancel(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, treeScript))
	c := s.client(t)
	ctx := context.Background()

	res, err := c.SendMessage(ctx, nonBlocking(textMessage("first tree")))
	if err != nil {
		t.Fatal(err)
	}
	root := res.(*a2a.Task)
	spawns := nestedSpawns(t, s, 2)
	mid, leaf := byChildPath(spawns, "0.1"), byChildPath(spawns, "0.1.1")
	for _, id := range []a2a.TaskID{mid, leaf} {
		testkit.WaitFor(t, 10*time.Second, "nested task working", func() bool {
			got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
			return err == nil && got.Status.State == a2a.TaskStateWorking && got.ContextID == root.ContextID
		})
	}
	got, _ := c.GetTask(ctx, &a2a.TaskQueryParams{ID: leaf})
	if got.Metadata["agentd/parent_task"] != string(mid) || got.Metadata["agentd/agent_path"] != "0.1.1" {
		t.Fatalf("leaf metadata %v", got.Metadata)
	}
	var pidsBefore []int
	testkit.WaitFor(t, 10*time.Second, "three subagents started", func() bool {
		pidsBefore = childPIDs(testkit.JSONLines(s.logs.String()))
		return len(pidsBefore) == 3
	})

	cancelled, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: mid})
	if err != nil || cancelled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel the middle: %+v %v", cancelled, err)
	}
	testkit.WaitFor(t, 10*time.Second, "leaf canceled", func() bool {
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: leaf})
		return err == nil && got.Status.State == a2a.TaskStateCanceled
	})
	testkit.WaitFor(t, 10*time.Second, "root completed after its child was cancelled", func() bool {
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: root.ID})
		return err == nil && got.Status.State == a2a.TaskStateCompleted
	})
	for _, pid := range pidsBefore {
		testkit.WaitFor(t, 5*time.Second, "process group gone", func() bool { return testkit.GroupDead(pid) })
	}

	// A second tree, cancelled at its root.
	res, err = c.SendMessage(ctx, nonBlocking(textMessage("second tree")))
	if err != nil {
		t.Fatal(err)
	}
	root2 := res.(*a2a.Task)
	spawns = nestedSpawns(t, s, 4)
	leaf2 := byChildPath(spawns[2:], "0.1.1")
	testkit.WaitFor(t, 10*time.Second, "second leaf working", func() bool {
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: leaf2})
		return err == nil && got.Status.State == a2a.TaskStateWorking
	})
	var all []int
	testkit.WaitFor(t, 10*time.Second, "six subagents started", func() bool {
		all = childPIDs(testkit.JSONLines(s.logs.String()))
		return len(all) == 6
	})
	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: root2.ID}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "second leaf canceled", func() bool {
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: leaf2})
		return err == nil && got.Status.State == a2a.TaskStateCanceled
	})
	for _, pid := range all {
		testkit.WaitFor(t, 5*time.Second, "process group gone", func() bool { return testkit.GroupDead(pid) })
	}
	// A dead child stays the service's (a zombie) until its reaper collects
	// it, which happens on its own schedule.
	testkit.WaitFor(t, 10*time.Second, "every child reaped by the service", func() bool { return len(testkit.Children(s.cmd.Process.Pid)) == 0 })
}

// A detached child is reaped and its result recorded after its parent
// finished.
func TestDetachedChildRecordedAfterParent(t *testing.T) {
	t.Parallel()
	script := writeScript(t, `[depth 0]
spawn detach "later"
answer "parent done {handles}"

[depth 1]
sleep 1s
answer "detached done"
`)
	s := startService(t, "--intelligence", "builtin:script="+script)
	c := s.client(t)
	ctx := context.Background()
	res, err := c.SendMessage(ctx, textMessage("go"))
	if err != nil {
		t.Fatal(err)
	}
	root := res.(*a2a.Task)
	handle, ok := strings.CutPrefix(artifactText(root), "parent done ")
	if root.Status.State != a2a.TaskStateCompleted || !ok || handle == "" {
		t.Fatalf("root %s: %q", root.Status.State, artifactText(root))
	}
	var task *a2a.Task
	testkit.WaitFor(t, 20*time.Second, "detached task completed", func() bool {
		task, err = c.GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(handle)})
		return err == nil && task.Status.State.Terminal()
	})
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "detached done" || task.Metadata["agentd/disposition"] != "detach" {
		t.Fatalf("detached task: %s %q %v", task.Status.State, artifactText(task), task.Metadata)
	}
	if !task.Status.Timestamp.After(*root.Status.Timestamp) {
		t.Fatalf("detached result recorded at %v, not after its parent finished at %v", task.Status.Timestamp, root.Status.Timestamp)
	}
	for _, pid := range childPIDs(testkit.JSONLines(s.logs.String())) {
		testkit.WaitFor(t, 5*time.Second, "detached child reaped", func() bool { return testkit.GroupDead(pid) })
	}
}

// The tree over its token ceiling drains and a one-shot run exits 7.
func TestTreeTokenCeilingExits7(t *testing.T) {
	t.Parallel()
	script := writeScript(t, `[depth 0]
spawn async "burn"
await
answer "unreachable"

[depth 1]
usage 600
call none/x
repeat
`)
	cmd := agentdCommand(t, "run", "--intelligence", "builtin:script="+script, "--tree-token-ceiling", "2000", "--instruction", "spend")
	var stderr testkit.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("exit = %v, want 7\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "tree token ceiling passed") {
		t.Fatalf("no drain in the log:\n%s", stderr.String())
	}
	for _, pid := range childPIDs(testkit.JSONLines(stderr.String())) {
		if testkit.Alive(pid) {
			t.Errorf("subagent process %d outlived the run", pid)
		}
	}
}

func TestNestingConfigExits2NamingTheSetting(t *testing.T) {
	t.Parallel()
	bad := writeScript(t, "[default]\nanswer \"x\"\njump\n")
	for _, tc := range []struct {
		args []string
		env  string
		name string
	}{
		{[]string{"serve", "--max-total-subagents", "0"}, "", "--max-total-subagents"},
		{[]string{"serve", "--max-inflight", "100000"}, "", "--max-inflight"},
		{[]string{"serve", "--spawn-burst", "-1"}, "", "--spawn-burst"},
		{[]string{"serve", "--spawn-rate", "0"}, "", "--spawn-rate"},
		{[]string{"serve", "--tree-token-ceiling", "0"}, "", "--tree-token-ceiling"},
		{[]string{"serve", "--max-depth", "17"}, "", "--max-depth"},
		{[]string{"serve"}, "AGENT_SPAWN_RATE=fast", "AGENT_SPAWN_RATE"},
		{[]string{"serve"}, "AGENT_ALLOW_TRIFECTA=maybe", "AGENT_ALLOW_TRIFECTA"},
		{[]string{"run", "--instruction", "x", "--intelligence", "builtin:script=/nonexistent/script"}, "", "--intelligence"},
		{[]string{"run", "--instruction", "x", "--intelligence", "builtin:script=" + bad}, "", "line 3"},
	} {
		wantUsageError(t, tc.env, tc.name, tc.args...)
	}
}
