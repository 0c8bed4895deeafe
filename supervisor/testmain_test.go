package supervisor

import (
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// Regression: TestMain's check for helpers no test uses ran whenever -run
// was unset, so `go test -list .` (which runs no test) and -skip (which
// leaves some out) failed, naming every helper as unused. The check now
// applies to a run of every test only; the test binary, re-exec'd with each
// flag, exits 0.
func TestMainNarrowedRuns(t *testing.T) {
	for _, args := range [][]string{{"-test.list", "."}, {"-test.skip", "."}} {
		t.Run(args[0], func(t *testing.T) {
			out, st := runTestBinary(t, args...)
			if st.Code() != 0 {
				t.Fatalf("test binary %v: %s\n%s", args, st, out)
			}
			if args[0] == "-test.list" && !strings.Contains(out, "\nTestMainNarrowedRuns\n") {
				t.Fatalf("test binary %v listed:\n%s", args, out)
			}
		})
	}
}

// runTestBinary runs this test binary (not as a helper) with args, through
// the reaper that owns wait4 here, and returns its combined output and exit.
func runTestBinary(t *testing.T, args ...string) (string, ExitStatus) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	theReaper.start(nil)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, api.EnvSubagent+"=") && !strings.HasPrefix(kv, envHelper+"=") {
			env = append(env, kv)
		}
	}
	// The race detector sleeps a second at exit by default.
	env = append(env, "GORACE=atexit_sleep_ms=0")
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	attr := &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{null.Fd(), outW.Fd(), outW.Fd()},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	exit := make(chan ExitStatus, 1)
	pid, err := theReaper.fork(exe, append([]string{exe}, args...), attr, exit)
	outW.Close()
	if err != nil {
		outR.Close()
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			theReaper.signalGroup(pid, syscall.SIGKILL)
			<-exit
		}
		testkit.WaitGroupGone(t, pid)
	})
	output := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(outR) // EOF once its process group is gone (the reaper kills it)
		outR.Close()
		output <- string(b)
	}()
	select {
	case st := <-exit:
		done = true
		return <-output, st
	case <-time.After(time.Minute):
		t.Fatalf("test binary %v still running after a minute", args)
		return "", ExitStatus{}
	}
}
