package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// Tests here make the test process a subreaper; like every test in this
// package they never run in parallel.

// subreaper makes the test process the subreaper of orphaned descendants for
// the rest of the test.
func subreaper(t *testing.T) {
	t.Helper()
	if err := EnableSubreaper(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
}

// A child forks a grandchild and exits. The grandchild reparents to the
// supervisor (a subreaper), and the reaper collects it as an orphan: one in its
// own process group when it exits, one left in the child's group when the
// reaper's last SIGKILL to that group ends it.
func TestOrphanedGrandchildIsReaped(t *testing.T) {
	subreaper(t)
	markUsed("grandchild")
	for _, tc := range []struct {
		group, sleep, status string
	}{
		{"own", "200ms", "exit 0"},
		{"same", "1h", "killed by SIGKILL"},
	} {
		t.Run(tc.group+" group", func(t *testing.T) {
			s, logs := newSupervisor(t, "fork-grandchild", withEnv(envGrandGroup+"="+tc.group, envSleep+"="+tc.sleep))
			before := Orphans()
			res := result(t, start(t, s, testPayload("x", time.Minute)), 10*time.Second)
			if res.Status != api.StatusCompleted {
				t.Fatalf("result = %+v", res)
			}
			gpid, err := strconv.Atoi(res.Distillate.Text())
			if err != nil {
				t.Fatalf("distillate %q is not the grandchild's pid", res.Distillate.Text())
			}
			want := fmt.Sprintf(`"orphan":true,"pid":%d,"status":%q`, gpid, tc.status)
			testkit.WaitFor(t, 10*time.Second, "the orphan's reap in the log", func() bool { return strings.Contains(logs.String(), want) })
			if got := Orphans(); got <= before {
				t.Errorf("orphans = %d, was %d", got, before)
			}
			if tc.group == "own" {
				testkit.WaitGroupGone(t, gpid)
			}
			wantRungs(t, s, 0, 0, 0)
		})
	}
}

// startTracer forks the "tracer" helper, which ptraces tracee and never waits
// for it. It returns the tracer's pid; the tracer is killed and reaped at
// cleanup.
func startTracer(t *testing.T, tracee int) int {
	t.Helper()
	markUsed("tracer")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	attr := &syscall.ProcAttr{
		Env:   []string{api.EnvSubagent + "=1", envHelper + "=tracer", envTracee + "=" + strconv.Itoa(tracee), "GORACE=atexit_sleep_ms=0"},
		Files: []uintptr{null.Fd(), null.Fd(), errW.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	exit := make(chan ExitStatus, 1)
	pid, err := theReaper.fork(exe, []string{exe, "tracer"}, attr, exit)
	errW.Close()
	if err != nil {
		errR.Close()
		t.Fatal(err)
	}
	stderr := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(errR)
		errR.Close()
		stderr <- string(b)
	}()
	t.Cleanup(func() {
		theReaper.signalGroup(pid, unix.SIGKILL)
		<-exit
		testkit.WaitGroupGone(t, pid)
	})
	// Attached when the tracee's status names the tracer, or failed when the
	// tracer exits.
	want := fmt.Sprintf("TracerPid:\t%d\n", pid)
	testkit.WaitFor(t, 10*time.Second, "the tracer attached", func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", tracee))
		if strings.Contains(string(b), want) {
			return true
		}
		select {
		case st := <-exit:
			exit <- st // for the cleanup
			msg := <-stderr
			if strings.Contains(msg, "operation not permitted") {
				t.Skipf("ptrace is not permitted here (%s): cannot make a process unreapable", strings.TrimSpace(msg))
			}
			t.Fatalf("tracer exited (%s): %s", st, msg)
		default:
		}
		return false
	})
	return pid
}

// A process that never reaps inside the budget is reported and counted, its
// node is abandoned, and Shutdown reports an unclean drain instead of hanging.
// The process is made unreapable by a ptrace tracer that never waits for it: a
// dead tracee's zombie is visible only to its tracer. Killing the tracer at the
// end hands the zombie back, and the reaper collects it.
func TestUnreapableProcessIsReported(t *testing.T) {
	markUsed("traced")
	logs := &testkit.Buffer{}
	cfg := fastConfig(logs)
	cfg.Env = []string{envHelper + "=traced", "GORACE=atexit_sleep_ms=0"}
	cfg.ReapGrace = 300 * time.Millisecond
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, s, testPayload("x", time.Minute))
	pid := waitPID(t, r)
	startTracer(t, pid) // cleanups run last-in first-out: the tracer goes before the group check

	s.Cancel(r.Handle(), "test")
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCancelled {
		t.Fatalf("result = %+v", res)
	}
	if n := s.Unreaped(); n != 1 {
		t.Errorf("unreaped = %d, want 1", n)
	}
	wantRungs(t, s, 1, 1, 1)
	if !strings.Contains(logs.String(), `"msg":"process would not reap inside the kill budget","pid":`+strconv.Itoa(pid)) {
		t.Errorf("the unreaped pid is not reported:\n%s", logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, ErrUnclean) {
		t.Errorf("shutdown = %v, want ErrUnclean", err)
	}
}
