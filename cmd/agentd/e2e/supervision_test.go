package e2e

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/internal/testkit"
)

const sendBody = `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-late","role":"user","parts":[{"kind":"text","text":"late"}]}}}`

// The first SIGTERM drains: new work gets a JSON-RPC error and the ladder
// starts gently (ctrl/cancel, then a long grace). A stopped child hears
// nothing, so the drain would wait; the second SIGTERM sends SIGKILL to every
// group at once, and the service exits at once, clean because everything was
// reaped.
func TestSecondSignalForces(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) { testSecondSignalForces(t, sig) })
	}
}

func testSecondSignalForces(t *testing.T, sig syscall.Signal) {
	s := startService(t, "--intelligence", "builtin:wait",
		"--drain-grace", "1m", "--kill-grace", "1m", "--drain-timeout", "2m", "--ping-interval", "1m")
	c := s.client(t)
	if _, err := c.SendMessage(context.Background(), nonBlocking(textMessage("long"))); err != nil {
		t.Fatal(err)
	}
	pid := runningChild(t, s)
	testkit.WaitFor(t, 10*time.Second, "child past its spawn frame", func() bool {
		return strings.Contains(s.logs.String(), `"msg":"subagent started"`)
	})
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A group stop completes asynchronously, thread by thread.
	testkit.WaitFor(t, 10*time.Second, "child stopped", func() bool { return testkit.Stopped(pid) })

	s.cmd.Process.Signal(sig)
	testkit.WaitFor(t, 10*time.Second, "the ladder's first rung", func() bool {
		return strings.Contains(s.logs.String(), `"msg":"kill ladder: ctrl/cancel"`)
	})
	r, err := postRPC(t, http.DefaultClient, s.url, []byte(sendBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error == nil || r.Error.Code != -32000 || !strings.Contains(r.Error.Message, "draining") {
		t.Fatalf("new work while draining: %d %s, want error -32000 naming the drain", r.status, r.body)
	}
	select {
	case <-s.waited:
		t.Fatalf("agentd exited on the first signal while a child was still alive: %v", s.err)
	default:
	}
	if testkit.GroupDead(pid) {
		t.Fatal("the first signal killed the stopped child; it should only have asked")
	}

	start := time.Now()
	s.cmd.Process.Signal(sig)
	select {
	case <-s.waited:
	case <-time.After(10 * time.Second):
		t.Fatal("agentd did not exit within 10s of the second signal")
	}
	t.Logf("exited %s after the second signal", time.Since(start))
	if s.err != nil {
		t.Fatalf("exit after a forced but complete drain: %v, want 0", s.err)
	}
	if !strings.Contains(s.logs.String(), "second signal: SIGKILL to every process group") {
		t.Error("log lacks the forced drain")
	}
	if !testkit.GroupDead(pid) {
		t.Fatalf("child %d survived the forced drain", pid)
	}
}

// A process that would not reap inside the drain budget makes the exit code
// 143. The test process makes agentd's child unreapable by ptracing it and not
// waiting: a dead tracee's zombie is visible only to its tracer. Once agentd
// has exited, the zombie reparents to this test (a subreaper for the test),
// which reaps it. Not parallel (subreaper tests never are): every orphan of
// another test's processes would reparent to this test process too.
func TestUncleanDrainExits143(t *testing.T) {
	runtime.LockOSThread() // the tracer is this thread; it must live until the reap
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

	s := startService(t, "--intelligence", "builtin:wait", "--drain-timeout", "10s", "--ping-interval", "1m", "--reap-grace", "300ms")
	c := s.client(t)
	if _, err := c.SendMessage(context.Background(), nonBlocking(textMessage("long"))); err != nil {
		t.Fatal(err)
	}
	pid := runningChild(t, s)
	testkit.WaitFor(t, 10*time.Second, "child past its spawn frame", func() bool {
		return strings.Contains(s.logs.String(), `"msg":"subagent started"`)
	})
	if err := unix.PtraceSeize(pid); err != nil {
		t.Skipf("ptrace is not permitted here (%v): cannot make a process unreapable", err)
	}
	reaped := false
	defer func() {
		if !reaped {
			var ws unix.WaitStatus
			unix.Kill(pid, unix.SIGKILL)
			unix.Wait4(pid, &ws, unix.WALL, nil)
		}
	}()

	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.waited:
	case <-time.After(20 * time.Second):
		t.Fatal("agentd hung on an unreapable child")
	}
	var ee *exec.ExitError
	if !errors.As(s.err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("exit = %v, want 143", s.err)
	}
	if !strings.Contains(s.logs.String(), `"msg":"process would not reap inside the kill budget"`) {
		t.Error("log does not report the unreaped process")
	}
	var ws unix.WaitStatus
	got, err := unix.Wait4(pid, &ws, unix.WALL, nil)
	if err != nil || got != pid {
		t.Fatalf("reaping the released child: %d %v", got, err)
	}
	reaped = true
	if !testkit.GroupDead(pid) {
		t.Fatalf("child group %d survived", pid)
	}
}

// runAgentd runs a one-shot agentd and returns its exit code and stderr. If
// onChild is set, it is called with the child's pid once the child has its
// payload.
func runAgentd(t *testing.T, onChild func(pid int), args ...string) (int, string) {
	t.Helper()
	cmd := agentdCommand(t, args...)
	var stderr testkit.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	if onChild != nil {
		var pid int
		testkit.WaitFor(t, 10*time.Second, "a running child", func() bool {
			kids := testkit.Children(cmd.Process.Pid)
			if len(kids) == 1 && strings.Contains(stderr.String(), `"msg":"subagent started"`) {
				pid = kids[0]
				return true
			}
			return false
		})
		onChild(pid)
	}
	var err error
	select {
	case err = <-done:
		done <- err
	case <-time.After(20 * time.Second):
		t.Fatalf("agentd %v did not exit within 20s\n%s", args, stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// Detector B on the real binary: builtin:wait blocks in one model call, sends
// no event, and is stalled after the progress timeout (exit 3, partial).
func TestNoProgressStallsRun(t *testing.T) {
	t.Parallel()
	code, stderr := runAgentd(t, nil, "run", "--intelligence", "builtin:wait", "--progress-timeout", "300ms", "--instruction", "x")
	if code != 3 || !strings.Contains(stderr, `"cause":"no_progress"`) || !strings.Contains(stderr, "run ended stalled") {
		t.Fatalf("exit %d, want 3 with a no_progress stall\n%s", code, stderr)
	}
}

// Detector C on the real binary: a child that stops answering (SIGSTOP) is
// stuck after the missed pings, and the ladder ends it.
func TestStoppedChildStallsRun(t *testing.T) {
	t.Parallel()
	var pid int
	code, stderr := runAgentd(t, func(p int) {
		pid = p
		if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}, "run", "--intelligence", "builtin:wait", "--ping-interval", "50ms", "--ping-miss", "4",
		"--drain-grace", "100ms", "--kill-grace", "100ms", "--instruction", "x")
	if code != 3 || !strings.Contains(stderr, `"cause":"pong_timeout"`) {
		t.Fatalf("exit %d, want 3 with a pong_timeout stall\n%s", code, stderr)
	}
	if !strings.Contains(stderr, `"msg":"kill ladder: SIGKILL"`) {
		t.Errorf("a stopped child ends only by SIGKILL; log lacks the rung\n%s", stderr)
	}
	if !testkit.GroupDead(pid) {
		t.Fatalf("child group %d survived", pid)
	}
}

func TestSupervisionFlagsValidated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  string
		name string
	}{
		{[]string{"serve", "--ping-miss", "0"}, "", "--ping-miss"},
		{[]string{"serve", "--ping-interval", "0s"}, "", "--ping-interval"},
		{[]string{"serve", "--progress-timeout", "-1s"}, "", "--progress-timeout"},
		{[]string{"serve", "--child-deadline", "48h"}, "", "--child-deadline"},
		{[]string{"serve", "--exec-deadline", "0s"}, "", "--exec-deadline"},
		{[]string{"serve", "--reap-grace", "0s"}, "", "--reap-grace"},
		{[]string{"serve", "--deadline", "20m"}, "", "--child-deadline"},
		{[]string{"serve", "--rlimit-as", "lots"}, "", "--rlimit-as"},
		{[]string{"serve", "--rlimit-as", "64MiB"}, "", "--rlimit-as"},
		{[]string{"serve", "--rlimit-cpu", "-1s"}, "", "--rlimit-cpu"},
		{[]string{"run", "--instruction", "x"}, "AGENT_PING_INTERVAL=often", "AGENT_PING_INTERVAL"},
		{[]string{"run", "--instruction", "x"}, "AGENT_RLIMIT_AS=1KiB", "--rlimit-as"},
	} {
		wantUsageError(t, tc.env, tc.name, tc.args...)
	}
}

// The resource limits reach the child.
func TestRlimitsReachChild(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:wait", "--rlimit-as", "4GiB", "--rlimit-cpu", "90s")
	c := s.client(t)
	if _, err := c.SendMessage(context.Background(), nonBlocking(textMessage("long"))); err != nil {
		t.Fatal(err)
	}
	pid := runningChild(t, s)
	testkit.WaitFor(t, 10*time.Second, "child past its spawn frame", func() bool {
		return strings.Contains(s.logs.String(), `"msg":"subagent started"`)
	})
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, nil, &lim); err != nil || lim.Cur != 4<<30 {
		t.Errorf("child RLIMIT_AS = %+v %v, want 4GiB", lim, err)
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_CPU, nil, &lim); err != nil || lim.Cur != 90 {
		t.Errorf("child RLIMIT_CPU = %+v %v, want 90s", lim, err)
	}
}

// A one-shot run drains on SIGTERM like the service: the child is asked to
// stop (ctrl/cancel) and the clean drain exits 0.
func TestRunDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	var stderr testkit.Buffer
	cmd := agentdCommand(t, "run", "--intelligence", "builtin:wait", "--drain-grace", "5s", "--instruction", "x")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var pid int
	testkit.WaitFor(t, 10*time.Second, "a child past its payload", func() bool {
		kids := testkit.Children(cmd.Process.Pid)
		if len(kids) == 1 && strings.Contains(stderr.String(), `"msg":"subagent started"`) {
			pid = kids[0]
			return true
		}
		return false
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want 0\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("agentd run did not drain within 20s\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), `"msg":"kill ladder: ctrl/cancel"`) {
		t.Errorf("the drain did not ask the child to stop\n%s", stderr.String())
	}
	if !testkit.GroupDead(pid) {
		t.Errorf("child group %d survived the drain", pid)
	}
}
