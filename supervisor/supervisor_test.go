package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

func TestRunCompletes(t *testing.T) {
	s, logs := newSupervisor(t, "complete")
	r := start(t, s, testPayload("say hi", time.Minute))
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "echo: say hi" {
		t.Fatalf("result = %+v", res)
	}
	// The child reported less usage than its events: the supervisor's count wins.
	if res.Usage.TokensIn != 30 || res.Usage.TokensOut != 12 || res.Usage.Steps != 1 {
		t.Fatalf("usage = %+v, want the supervisor's count {30 12 1}", res.Usage)
	}
	// The child's stderr line is forwarded, tagged with run_id and agent_path.
	testkit.WaitFor(t, 10*time.Second, "the forwarded line", func() bool { return strings.Contains(logs.String(), `"msg":"helper working"`) })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"helper working"`) {
			if !strings.Contains(line, `"run_id":"run-test"`) || !strings.Contains(line, `"agent_path":"0"`) || !strings.Contains(line, `"objective_len":6`) {
				t.Fatalf("forwarded line lacks its tags: %s", line)
			}
		}
	}
}

func TestCancelCooperativeChild(t *testing.T) {
	s, _ := newSupervisor(t, "cooperative")
	r := start(t, s, testPayload("work", time.Minute))
	pid := waitPID(t, r)
	testkit.WaitFor(t, 10*time.Second, "the cancel taken", func() bool { return s.Cancel(r.Handle(), "test") })
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCancelled || res.Distillate.Text() != "stopped" {
		t.Fatalf("result = %+v", res)
	}
	testkit.WaitGroupGone(t, pid)
}

func TestCancelEscalatesToSIGKILL(t *testing.T) {
	s, logs := newSupervisor(t, "ignore-term")
	r := start(t, s, testPayload("work", time.Minute))
	pid := waitPID(t, r)
	// Wait until it ignores SIGTERM (its first act after the spawn frame arrives).
	testkit.WaitFor(t, 10*time.Second, "the child ignoring SIGTERM", func() bool { return ignoresTerm(pid) })
	s.Cancel(r.Handle(), "test")
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCancelled {
		t.Fatalf("status = %s", res.Status)
	}
	for _, rung := range []string{"kill ladder: ctrl/cancel", "kill ladder: SIGTERM", "kill ladder: SIGKILL"} {
		if !strings.Contains(logs.String(), rung) {
			t.Errorf("log lacks %q", rung)
		}
	}
	wantRungs(t, s, 1, 1, 1)
	wantVerdicts(t, s, map[string]int64{string(api.StatusCancelled): 1})
	testkit.WaitGroupGone(t, pid)
}

// ignoresTerm reports whether pid has SIGTERM ignored (SigIgn in /proc/PID/status).
func ignoresTerm(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "SigIgn:") {
			mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "SigIgn:")), 16, 64)
			return err == nil && mask&(1<<(15-1)) != 0
		}
	}
	return false
}

func TestProtocolViolationKillsChildOnly(t *testing.T) {
	for _, helper := range []string{"bad-frame", "huge-frame"} {
		t.Run(helper, func(t *testing.T) {
			s, _ := newSupervisor(t, helper)
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			r := start(t, s, testPayload("x", time.Minute))
			res := result(t, r, 10*time.Second)
			if res.Status != api.StatusCrashed || res.Cause != api.CauseProtocolViolation {
				t.Fatalf("result = %+v", res)
			}
			// Killed at once: no ctrl/cancel, no SIGTERM.
			wantRungs(t, s, 0, 0, 1)
			wantVerdicts(t, s, map[string]int64{api.CauseProtocolViolation: 1})
			if helper == "huge-frame" {
				// The claimed length is refused before a body buffer exists.
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
					t.Errorf("the supervisor allocated %d MiB for a claimed 100 MiB frame", grew>>20)
				}
			}
		})
	}
	// The supervisor goes on serving.
	s, _ := newSupervisor(t, "complete")
	if res := result(t, start(t, s, testPayload("again", time.Minute)), 10*time.Second); res.Status != api.StatusCompleted {
		t.Fatalf("after violations: %+v", res)
	}
}

func TestSpawnReadyTimeout(t *testing.T) {
	s, _ := newSupervisor(t, "no-ready", func(c *Config) { c.SpawnReady = 200 * time.Millisecond })
	res := result(t, start(t, s, testPayload("x", time.Minute)), 10*time.Second)
	if res.Status != api.StatusCrashed || res.Cause != api.CauseSpawnTimeout {
		t.Fatalf("result = %+v", res)
	}
}

func TestCrashBeforeReady(t *testing.T) {
	s, _ := newSupervisor(t, "crash-before-ready")
	r := start(t, s, testPayload("x", time.Minute))
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCrashed || res.Cause != api.CauseExitedWithoutResult || !strings.Contains(res.Detail, "before ctrl/ready: exit 3") {
		t.Fatalf("result = %+v", res)
	}
	wantRungs(t, s, 0, 0, 0) // it was gone before any rung
	if o := r.Outcome(); o != OutcomeCrashBeforeReady {
		t.Errorf("outcome = %s, want crash_before_ready (weight 3 for the governor)", o)
	}
}

func TestExitWithoutResult(t *testing.T) {
	s, _ := newSupervisor(t, "exit-no-result")
	res := result(t, start(t, s, testPayload("x", time.Minute)), 10*time.Second)
	if res.Status != api.StatusCrashed || res.Cause != api.CauseExitedWithoutResult {
		t.Fatalf("result = %+v", res)
	}
}

// EOF on control-out is not death: the supervisor waits for the reap, and runs
// the ladder when it does not come.
func TestClosedStdoutIsNotDeath(t *testing.T) {
	s, _ := newSupervisor(t, "close-stdout", func(c *Config) { c.KillGrace = 10 * time.Second })
	r := start(t, s, testPayload("x", time.Minute))
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCrashed || res.Cause != api.CauseExitedWithoutResult || !strings.Contains(res.Detail, "did not exit (exiting)") {
		t.Fatalf("result = %+v", res)
	}
	// It ignores ctrl/cancel and dies of SIGTERM.
	wantRungs(t, s, 1, 1, 0)
	wantVerdicts(t, s, map[string]int64{api.CauseExitedWithoutResult: 1})
}

func TestDeadlineKills(t *testing.T) {
	s, _ := newSupervisor(t, "cooperative")
	res := result(t, start(t, s, testPayload("x", 300*time.Millisecond)), 10*time.Second)
	if res.Status != api.StatusDeadline {
		t.Fatalf("result = %+v", res)
	}
}

func TestPayloadNeverOnArgv(t *testing.T) {
	s, _ := newSupervisor(t, "cooperative")
	secret := "objective-token-7f3a9c"
	r := start(t, s, testPayload(secret, time.Minute))
	pid := waitPID(t, r)
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(cmdline, []byte(secret)) || bytes.Contains(cmdline, []byte("objective")) {
		t.Fatalf("argv holds the payload: %q", cmdline)
	}
	s.Cancel(r.Handle(), "done")
	result(t, r, 10*time.Second)
}

func TestShutdownDrainsEverything(t *testing.T) {
	s, _ := newSupervisor(t, "ignore-term")
	var runs []*Run
	for i := 0; i < 3; i++ {
		runs = append(runs, start(t, s, testPayload("x", time.Minute)))
	}
	for _, r := range runs {
		waitPID(t, r)
	}
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, r := range runs {
		if res := r.Result(); res.Status != api.StatusCancelled {
			t.Fatalf("after drain: %+v", res)
		}
	}
	if _, err := s.Start(ctx, StartRequest{Payload: testPayload("late", time.Minute)}); err != ErrDraining {
		t.Fatalf("start while draining: %v", err)
	}
}

// Issue 28.8: a spawn payload of megabytes through the 64 KiB pipe to a
// child that reads it slowly but steadily (a loaded machine) takes longer
// than KillGrace in all; the child was killed as if it had stopped reading.
// The write's deadline now measures the child's progress: the payload
// arrives and the run completes.
func TestSlowReaderGetsItsPayload(t *testing.T) {
	s, _ := newSupervisor(t, "slow-reader", withEnv(envReadPace+"=2ms"))
	objective := strings.Repeat("x", 2<<20) // 512 reads of 4 KiB, 2ms apart: over 1s, KillGrace 150ms
	r := start(t, s, testPayload(objective, time.Minute))
	res := result(t, r, 30*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Text() != fmt.Sprint("read ", len(objective)) {
		t.Fatalf("result = %+v", res)
	}
	wantRungs(t, s, 0, 0, 0)
}

// A child that reads nothing of its payload is still caught: once the pipe
// is full, KillGrace passes with no byte taken, the write fails and the
// child is killed.
func TestChildReadingNothingIsKilled(t *testing.T) {
	s, _ := newSupervisor(t, "no-read")
	r := start(t, s, testPayload(strings.Repeat("x", 1<<20), time.Minute))
	res := result(t, r, 30*time.Second)
	if res.Status != api.StatusCrashed || !strings.Contains(res.Detail, "write spawn payload") {
		t.Fatalf("result = %+v", res)
	}
}
