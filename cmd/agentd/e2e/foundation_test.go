package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/internal/testkit"
)

func TestSendCompletes(t *testing.T) {
	t.Parallel()
	s := startService(t)
	c := s.client(t)
	res, err := c.SendMessage(context.Background(), textMessage("count these four words"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("result is %T, want a task", res)
	}
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state = %s", task.Status.State)
	}
	want := `"count these four words" has 4 words and 22 characters`
	if got := artifactText(task); got != want {
		t.Fatalf("artifact = %q, want %q", got, want)
	}
	if len(task.Artifacts) != 1 || task.Artifacts[0].ID != a2a.ArtifactID(string(task.ID)+".distillate") {
		t.Fatalf("artifacts = %+v, want one %s.distillate", task.Artifacts, task.ID)
	}
	got, err := c.GetTask(context.Background(), &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("tasks/get: %+v %v", got, err)
	}
}

func TestStreamShowsWorkingThenCompleted(t *testing.T) {
	t.Parallel()
	s := startService(t)
	c := s.client(t)
	var states []a2a.TaskState
	var artifact string
	for ev, err := range c.SendStreamingMessage(context.Background(), textMessage("alpha beta")) {
		if err != nil {
			t.Fatal(err)
		}
		switch v := ev.(type) {
		case *a2a.Task:
			states = append(states, v.Status.State)
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, v.Status.State)
		case *a2a.TaskArtifactUpdateEvent: // the answer streams: later pieces append
			if !v.Append {
				artifact = ""
			}
			artifact += v.Artifact.Parts[0].(a2a.TextPart).Text
		}
	}
	idx := func(s a2a.TaskState) int {
		for i, v := range states {
			if v == s {
				return i
			}
		}
		return -1
	}
	w, c2 := idx(a2a.TaskStateWorking), idx(a2a.TaskStateCompleted)
	if w < 0 || c2 < 0 || w > c2 || c2 != len(states)-1 {
		t.Fatalf("states = %v, want working then completed last", states)
	}
	if !strings.Contains(artifact, "2 words") {
		t.Fatalf("artifact = %q", artifact)
	}
}

// runningChild waits until the service has exactly one child and it is running.
func runningChild(t *testing.T, s *service) int {
	t.Helper()
	var pid int
	testkit.WaitFor(t, 10*time.Second, "a child process", func() bool {
		kids := testkit.Children(s.cmd.Process.Pid)
		if len(kids) == 1 {
			pid = kids[0]
			return true
		}
		return false
	})
	return pid
}

func TestCancelKillsTheChildGroup(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:wait")
	c := s.client(t)
	ctx := context.Background()
	secret := "objective-marker-5d1e"
	res, err := c.SendMessage(ctx, nonBlocking(textMessage("wait for "+secret)))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	pid := runningChild(t, s)
	testkit.WaitFor(t, 10*time.Second, "task working", func() bool {
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		return err == nil && got.Status.State == a2a.TaskStateWorking
	})

	// The child's argv holds no part of the objective.
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(cmdline, []byte(secret)) || bytes.Contains(cmdline, []byte("wait for")) {
		t.Fatalf("child argv holds the objective: %q", cmdline)
	}

	cancelled, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("after cancel: %s", cancelled.Status.State)
	}
	testkit.WaitFor(t, 5*time.Second, "child process group gone", func() bool { return testkit.GroupDead(pid) })
	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); err == nil {
		t.Fatal("cancelling a canceled task succeeded")
	}
}

// SIGKILL to the supervisor collapses a three-level tree: every child armed
// PR_SET_PDEATHSIG(SIGKILL) before ctrl/ready, so each level dies with its
// parent. Without it the children (sleeping for ten minutes) would outlive the
// poll. Issues 2 and 4 bound the collapse (2s, then 1s); the kernel delivers
// the signal at once, so the 1s bound is a contract, not a speed goal: it
// measures in milliseconds, and the time is logged.
func TestSIGKILLOfSupervisorLeavesNoChild(t *testing.T) {
	t.Parallel()
	// Each root spawns a child that spawns a grandchild; every level then blocks.
	script := writeScript(t, "[depth 0]\nspawn sync \"level one\"\n[depth 1]\nspawn sync \"level two\"\n[depth 2]\nsleep 10m\n")
	s := startService(t, "--intelligence", "builtin:script="+script)
	c := s.client(t)
	for i := 0; i < 2; i++ {
		if _, err := c.SendMessage(context.Background(), nonBlocking(textMessage(fmt.Sprintf("task %d", i)))); err != nil {
			t.Fatal(err)
		}
	}
	// Two trees of three levels: six children, every one past its payload
	// (which comes after PDEATHSIG is armed and ctrl/ready is sent).
	var kids []int
	testkit.WaitFor(t, 20*time.Second, "six children past their payload", func() bool {
		kids = testkit.Children(s.cmd.Process.Pid)
		return len(kids) == 6 && strings.Count(s.logs.String(), `"msg":"subagent started"`) >= 6
	})
	perDepth := map[float64]int{}
	for _, r := range testkit.WithMsg(testkit.JSONLines(s.logs.String()), "subagent started") {
		d, _ := r["depth"].(float64)
		perDepth[d]++
	}
	if perDepth[0] != 2 || perDepth[1] != 2 || perDepth[2] != 2 {
		t.Fatalf("subagents started per depth: %v, want 2 at each of 0, 1, 2", perDepth)
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	start := time.Now()
	testkit.WaitFor(t, time.Second, "every child and its process group dead within 1s of SIGKILL to the supervisor", func() bool {
		for _, k := range kids {
			if testkit.Alive(k) || !testkit.GroupDead(k) {
				return false
			}
		}
		return true
	})
	t.Logf("all children gone %s after SIGKILL", time.Since(start))
}

func TestPlainHTTPOffLoopbackRefused(t *testing.T) {
	t.Parallel()
	wantUsageError(t, "", "--listen", "serve", "--listen", "0.0.0.0:8080")
}

func TestBadConfigExits2NamingTheSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  string
		name string
	}{
		{[]string{"serve", "--max-steps", "0"}, "", "--max-steps"},
		{[]string{"serve", "--deadline", "-1s"}, "", "--deadline"},
		{[]string{"serve", "--intelligence", "builtin:nope"}, "", "--intelligence"},
		{[]string{"serve", "--public-url", "agentd.example:8443"}, "", "--public-url"},
		{[]string{"serve"}, "AGENT_MAX_TOKENS=lots", "AGENT_MAX_TOKENS"},
		{[]string{"run"}, "", "--instruction"},
		{[]string{"run", "--instruction", "x", "--mode", "reactive"}, "", "--mode"},
	} {
		wantUsageError(t, tc.env, tc.name, tc.args...)
	}
}

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	out, err := agentdCommand(t, "run", "--instruction", "one two three").Output()
	if err != nil {
		t.Fatalf("completed run: %v", err)
	}
	if !strings.Contains(string(out), "3 words") {
		t.Fatalf("stdout = %q", out)
	}
	cmd := agentdCommand(t, "run", "--intelligence", "builtin:wait", "--deadline", "300ms", "--instruction", "x")
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 124 {
		t.Fatalf("deadline run: %v, want exit 124", err)
	}
}

func TestDrainOnSIGTERMExitsZero(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:wait")
	c := s.client(t)
	res, err := c.SendMessage(context.Background(), nonBlocking(textMessage("long")))
	if err != nil {
		t.Fatal(err)
	}
	_ = res
	pid := runningChild(t, s)
	testkit.WaitFor(t, 10*time.Second, "child past its spawn frame", func() bool {
		return strings.Contains(s.logs.String(), `"msg":"subagent started"`)
	})
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(10 * time.Second):
		t.Fatal("agentd did not drain within 10s")
	}
	if s.err != nil {
		t.Fatalf("drain exit: %v\n%s", s.err, s.logs.String())
	}
	if !testkit.GroupDead(pid) {
		t.Fatalf("child %d survived the drain", pid)
	}
	// The drain stopped the child itself (PDEATHSIG would have killed it at
	// the exit anyway) and only then reported a clean drain.
	logs := s.logs.String()
	if !strings.Contains(logs, `"msg":"kill ladder: ctrl/cancel"`) || !strings.Contains(logs, `"msg":"drained cleanly"`) {
		t.Fatalf("the log lacks the drain's ctrl/cancel and its clean end:\n%s", logs)
	}
}
