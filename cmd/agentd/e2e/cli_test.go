package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/internal/testkit"
)

// --distillate-budget and --max-repeats hold for every subagent of a tree,
// not only the root: a child's 405-character answer is stored and reaches its
// parent as a reference with a summary at a budget of 200, and a child that
// repeats a call three times is not loop_detected at --max-repeats 4 (both
// were the defaults for children: the answer stayed inline, and the child
// stopped at the default of 3).
func TestChildrenHaveTheTreesLimits(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789", 40) + "abcde"
	script := writeScript(t, `[depth 0]
spawn sync "write it"
answer "root saw: {results}"
[depth 1]
call subagent.status {"handle":"h"}
call subagent.status {"handle":"h"}
call subagent.status {"handle":"h"}
answer "`+long+`"
`)
	stdout, stderr, code := runOnceEnv(t, nil, "--state-dir", t.TempDir(), "--intelligence", "builtin:script="+script,
		"--distillate-budget", "200", "--max-repeats", "4", "--instruction", "go")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if strings.Contains(stdout, long) || !strings.Contains(stdout, "of 405 characters") {
		t.Fatalf("the child's answer did not reach the root as a stored reference:\n%s", stdout)
	}
}

// `ctl a2a.Caps` prints each cap and the admission lines, and no empty
// field (it printed "admission: <nil>").
func TestCtlCapsPrintsNoNil(t *testing.T) {
	t.Parallel()
	s := startService(t)
	out, code := runCombined(t, "ctl", "a2a.Caps", "--to", s.url)
	if code != 0 || strings.Contains(out, "<nil>") || !strings.Contains(out, "max_depth: ") || !strings.Contains(out, "admission: runs ") {
		t.Fatalf("ctl a2a.Caps: exit %d\n%s", code, out)
	}
}

// Two services on one state directory: the second says so at start, and
// its tasks/cancel of a task the first runs says where the task runs (it
// said only "is working: task cannot be canceled"); the first cancels it.
func TestTwoServicesOnOneStateDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := startService(t, "--state-dir", dir, "--intelligence", "builtin:wait")
	ctx := context.Background()
	res, err := a.client(t).SendMessage(ctx, nonBlocking(textMessage("wait")))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("send: %T", res)
	}
	b := startService(t, "--state-dir", dir, "--intelligence", "builtin:wait")
	if !strings.Contains(b.logs.String(), "another agentd process uses this state directory") {
		t.Errorf("the second service did not say it shares the state directory:\n%s", b.logs.String())
	}
	bc := b.client(t)
	testkit.WaitFor(t, 10*time.Second, "the task stored", func() bool {
		_, err := bc.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		return err == nil
	})
	e := rpc(t, b, "0.3", "tasks/cancel", `{"id":"`+string(task.ID)+`"}`, nil)
	if e == nil {
		t.Fatal("the other service cancelled a task it does not run")
	}
	if e.Code != -32002 || !strings.Contains(string(e.Data), "in another agentd process sharing this task store") || !strings.Contains(string(e.Data), "only the process that accepted it can cancel it") {
		t.Fatalf("cancel through the other service: %d %s %s", e.Code, e.Message, e.Data)
	}
	got, err := a.client(t).CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel through the service that runs it: %+v %v", got, err)
	}
}
