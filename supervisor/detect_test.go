package supervisor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

func TestClassify(t *testing.T) {
	th := thresholds{interval: 5 * time.Second, progress: 120 * time.Second, miss: 3}
	for _, tc := range []struct {
		name  string
		o     observation
		want  Health
		cause string
	}{
		{"events and pongs flowing", observation{quiet: time.Second}, Healthy, ""},
		{"events flowing, a pong or two late: transient", observation{quiet: time.Second, missed: 2}, Healthy, ""},
		{"no events, pongs flowing: a long call", observation{quiet: 60 * time.Second}, BusyHealthy, ""},
		{"no events, pongs late but under the miss count", observation{quiet: 60 * time.Second, missed: 2}, BusyHealthy, ""},
		{"no events, pongs stopped", observation{quiet: 60 * time.Second, missed: 3}, Stuck, api.CausePongTimeout},
		{"events flowing but pongs stopped for good", observation{quiet: time.Second, missed: 3}, Stuck, api.CausePongTimeout},
		{"no progress for the timeout, pongs flowing", observation{quiet: 120 * time.Second}, Stuck, api.CauseNoProgress},
		{"no progress but the supervisor serves its tool call", observation{quiet: 300 * time.Second, busy: true}, BusyHealthy, ""},
		{"EOF while pongs flowed", observation{eof: true, quiet: time.Second}, Exiting, ""},
		{"EOF after pongs stopped", observation{eof: true, missed: 1}, Dead, ""},
		{"EOF after a long silence, pongs flowing", observation{eof: true, quiet: 500 * time.Second}, Exiting, ""},
		{"result sent, then silence", observation{result: true, quiet: 500 * time.Second, missed: 5}, Exiting, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, cause := classify(tc.o, th)
			if h != tc.want || cause != tc.cause {
				t.Fatalf("classify(%+v) = %s %q, want %s %q", tc.o, h, cause, tc.want, tc.cause)
			}
		})
	}
}

// A child in a long call that keeps answering pings is BusyHealthy and is left
// alone, although it sends no event for many ping intervals.
func TestBusyChildAnsweringPingsIsNotKilled(t *testing.T) {
	s, _ := newSupervisor(t, "busy", withEnv(envBusy+"=2500ms"), func(c *Config) {
		c.PingInterval = 50 * time.Millisecond
		c.PingMiss = 20 // a second without pongs would be stuck
		c.ProgressTimeout = time.Minute
	})
	r := start(t, s, testPayload("long call", time.Minute))
	waitPID(t, r)
	var seen bool
	testkit.WaitFor(t, 10*time.Second, "busy_healthy reported or the run ended", func() bool {
		seen = seen || r.Info().Health == BusyHealthy
		return seen || isDone(r)
	})
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "done after a long call" {
		t.Fatalf("result = %+v", res)
	}
	if !seen {
		t.Error("the classifier never reported busy_healthy during the long call")
	}
	if st := s.Stats(); st.Pongs < 5 {
		t.Errorf("pongs = %d, want the child to have answered many pings", st.Pongs)
	}
	wantRungs(t, s, 0, 0, 0)
	wantVerdicts(t, s, map[string]int64{})
}

func isDone(r *Run) bool {
	select {
	case <-r.Done():
		return true
	default:
		return false
	}
}

// slowTool is a tool server whose one tool takes d to answer.
type slowTool struct{ d time.Duration }

func (s slowTool) Call(ctx context.Context, _ NodeInfo, _ string, _ json.RawMessage) api.ToolResult {
	t := time.NewTimer(s.d)
	defer t.Stop()
	select {
	case <-t.C:
		return api.TextResult("slow done", false)
	case <-ctx.Done():
		return api.TextResult("cancelled", true)
	}
}

// Waiting on the supervisor (a tool call it serves, such as a sync spawn) is
// not the child's stall: Detector B waits for the answer.
func TestToolCallPausesNoProgressWatchdog(t *testing.T) {
	s, _ := newSupervisor(t, "slow-tool", func(c *Config) {
		c.Tools = map[string]ToolServer{"slow": slowTool{d: time.Second}}
		c.ProgressTimeout = 200 * time.Millisecond
		c.PingInterval = 50 * time.Millisecond
		c.PingMiss = 40
	})
	p := testPayload("use the slow tool", time.Minute)
	p.Scope.Allow = []api.ToolRef{{Server: "slow", Tool: "wait"}}
	r := start(t, s, p)
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "tool said: slow done" {
		t.Fatalf("result = %+v", res)
	}
	wantRungs(t, s, 0, 0, 0)
}

// Detector B: no frame but pongs for the progress timeout is stalled; the
// cooperative child's partial distillate survives the verdict.
func TestNoProgressIsStalled(t *testing.T) {
	s, logs := newSupervisor(t, "busy", withEnv(envBusy+"=1h"), func(c *Config) {
		c.ProgressTimeout = 300 * time.Millisecond
		c.PingInterval = 50 * time.Millisecond
		c.PingMiss = 40
		c.DrainGrace = 10 * time.Second // it obeys ctrl/cancel; no later rung
	})
	r := start(t, s, testPayload("never progresses", time.Minute))
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusStalled || res.Cause != api.CauseNoProgress || res.Distillate.Text() != "partial work" {
		t.Fatalf("result = %+v", res)
	}
	if api.ExitCode(res) != api.ExitPartial {
		t.Errorf("exit code = %d, want %d", api.ExitCode(res), api.ExitPartial)
	}
	wantRungs(t, s, 1, 0, 0)
	wantVerdicts(t, s, map[string]int64{api.CauseNoProgress: 1})
	if !strings.Contains(logs.String(), `"cause":"no_progress"`) {
		t.Error("log lacks the no_progress verdict")
	}
}

// Detector C: a child that stops answering (SIGSTOP) is stuck after PingMiss
// pings; a stopped process hears neither ctrl/cancel nor SIGTERM, so the ladder
// runs to SIGKILL.
func TestStoppedChildIsStuck(t *testing.T) {
	s, _ := newSupervisor(t, "responsive", func(c *Config) {
		c.PingInterval = 50 * time.Millisecond
		c.PingMiss = 6
	})
	r := start(t, s, testPayload("then freeze", time.Minute))
	pid := waitPID(t, r)
	testkit.WaitFor(t, 10*time.Second, "two pongs", func() bool { return s.Stats().Pongs >= 2 })
	if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A group stop completes asynchronously, thread by thread.
	testkit.WaitFor(t, 10*time.Second, "the child stopped", func() bool { return testkit.Stopped(pid) || isDone(r) })
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusStalled || res.Cause != api.CausePongTimeout {
		t.Fatalf("result = %+v", res)
	}
	wantRungs(t, s, 1, 1, 1)
	wantVerdicts(t, s, map[string]int64{api.CausePongTimeout: 1})
}

// Detector A on a child that ignores ctrl/cancel and SIGTERM: the ladder runs
// every rung.
func TestDeadlineOnChildIgnoringSIGTERM(t *testing.T) {
	s, logs := newSupervisor(t, "ignore-term")
	r := start(t, s, testPayload("x", 400*time.Millisecond))
	pid := waitPID(t, r)
	testkit.WaitFor(t, 10*time.Second, "the child ignoring SIGTERM", func() bool { return ignoresTerm(pid) || isDone(r) })
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusDeadline {
		t.Fatalf("result = %+v", res)
	}
	wantRungs(t, s, 1, 1, 1)
	wantVerdicts(t, s, map[string]int64{string(api.StatusDeadline): 1})
	for _, rung := range []string{"kill ladder: ctrl/cancel", "kill ladder: SIGTERM", "kill ladder: SIGKILL"} {
		if !strings.Contains(logs.String(), rung) {
			t.Errorf("log lacks %q", rung)
		}
	}
}

// ChildDeadline caps the payload's deadline, and the child is told the cap.
func TestChildDeadlineCapsPayload(t *testing.T) {
	s, _ := newSupervisor(t, "responsive", func(c *Config) {
		c.ChildDeadline = 300 * time.Millisecond
		c.DrainGrace = 10 * time.Second // it obeys ctrl/cancel; no later rung
	})
	before := time.Now()
	r := start(t, s, testPayload("x", time.Hour))
	waitPID(t, r)
	if d := r.Info().Deadline; d.After(before.Add(time.Second)) {
		t.Errorf("deadline %s after start, want the 300ms cap", d.Sub(before))
	}
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusDeadline || !strings.Contains(res.Detail, "300ms") {
		t.Fatalf("result = %+v", res)
	}
	wantRungs(t, s, 1, 0, 0)
}

// EOF on control-out is classified (Exiting while pongs flowed, Dead after they
// stopped), and the tree changes only when the reap confirms it: no ladder.
func TestEOFIsConfirmedByTheReap(t *testing.T) {
	for _, tc := range []struct {
		pong string
		want Health
	}{
		{"yes", Exiting},
		{"no", Dead},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			s, logs := newSupervisor(t, "close-then-exit", withEnv(envPong+"="+tc.pong), func(c *Config) {
				c.PingInterval = 100 * time.Millisecond
				c.PingMiss = 1000
				c.DrainGrace = time.Minute // the reap, not the ladder, ends it
			})
			r := start(t, s, testPayload("x", time.Minute))
			pid := waitPID(t, r)
			if tc.pong == "yes" {
				testkit.WaitFor(t, 10*time.Second, "a pong", func() bool { return s.Stats().Pongs >= 1 })
			} else {
				// The second ping goes out only after the first was counted as missed.
				testkit.WaitFor(t, 10*time.Second, "two pings", func() bool { return s.Stats().Pings >= 2 })
			}
			unix.Kill(pid, unix.SIGUSR2) // close control-out
			testkit.WaitFor(t, 10*time.Second, "the health in the log", func() bool { return strings.Contains(logs.String(), `"health":"`+string(tc.want)+`"`) })
			if isDone(r) {
				t.Fatal("the run ended on EOF alone")
			}
			unix.Kill(pid, unix.SIGUSR1) // exit 1
			res := result(t, r, 10*time.Second)
			if res.Status != api.StatusCrashed || res.Cause != api.CauseExitedWithoutResult || !strings.Contains(res.Detail, "exit 1") {
				t.Fatalf("result = %+v", res)
			}
			wantRungs(t, s, 0, 0, 0)
		})
	}
}

func TestRunOutcome(t *testing.T) {
	s, _ := newSupervisor(t, "complete")
	if o := start(t, s, testPayload("x", time.Minute)).Outcome(); o != OutcomeClean {
		t.Errorf("completed run: outcome %s, want clean", o)
	}
	s2, _ := newSupervisor(t, "cooperative", func(c *Config) { c.DrainGrace = 10 * time.Second })
	r := start(t, s2, testPayload("x", time.Minute))
	waitPID(t, r)
	s2.Cancel(r.Handle(), "test")
	if o := r.Outcome(); o != OutcomeClean {
		t.Errorf("cooperative cancel (exit 0 with a result): outcome %s, want clean", o)
	}
	s3, _ := newSupervisor(t, "ignore-term")
	r = start(t, s3, testPayload("x", time.Minute))
	waitPID(t, r)
	s3.Cancel(r.Handle(), "test")
	if o := r.Outcome(); o != OutcomeFailure {
		t.Errorf("killed by SIGKILL: outcome %s, want failure", o)
	}
}

func TestRlimitsApplied(t *testing.T) {
	const as = 1 << 46 // 64 TiB: room for the race detector's shadow memory
	s, _ := newSupervisor(t, "responsive", func(c *Config) {
		c.RlimitAS = as
		c.RlimitCPU = 3600
	})
	r := start(t, s, testPayload("x", time.Minute))
	pid := waitPID(t, r)
	var lim unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_AS, nil, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur != as || lim.Max != as {
		t.Errorf("RLIMIT_AS = %+v, want %d", lim, uint64(as))
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_CPU, nil, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur != 3600 || lim.Max != 3601 {
		t.Errorf("RLIMIT_CPU = %+v, want soft 3600 and hard 3601", lim)
	}
	s.Cancel(r.Handle(), "done")
	result(t, r, 10*time.Second)
}

// After its result the detectors stand down; a child that then does not exit
// is reaped by the ladder, and its result stands.
func TestNoExitAfterResult(t *testing.T) {
	s, _ := newSupervisor(t, "result-then-hang", func(c *Config) {
		c.ProgressTimeout = 50 * time.Millisecond // would call it stalled if it still watched
		c.PingInterval = 20 * time.Millisecond
		c.KillGrace = 10 * time.Second // it dies of SIGTERM; no later rung
	})
	res := result(t, start(t, s, testPayload("x", time.Minute)), 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "done" {
		t.Fatalf("result = %+v", res)
	}
	wantRungs(t, s, 1, 1, 0)
	wantVerdicts(t, s, map[string]int64{})
}

// The result settles at its frame, before the process is reaped: Settled
// closes and SettledResult is the child's while the process still lives and
// the node is still in the tree; a cancel after it runs the ladder to reap
// the process but changes the result no more, and Result at Done is the same.
func TestResultSettlesBeforeTheReap(t *testing.T) {
	s, _ := newSupervisor(t, "result-then-hang", func(c *Config) {
		c.DrainGrace = time.Second // the child's result to the ladder that reaps it (SIGTERM ends it)
		c.KillGrace = 10 * time.Second
	})
	r := start(t, s, testPayload("x", time.Minute))
	select {
	case <-r.Settled():
	case <-time.After(10 * time.Second):
		t.Fatal("the result did not settle")
	}
	if isDone(r) {
		t.Fatal("Done before the child was reaped")
	}
	res := r.SettledResult()
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "done" {
		t.Fatalf("settled result = %+v", res)
	}
	pid := r.Info().PID
	if pid <= 0 || unix.Kill(pid, 0) != nil {
		t.Fatalf("the child (pid %d) should still be alive once its result settled", pid)
	}
	if _, ok := s.Lookup(r.Handle()); !ok {
		t.Fatal("the node left the tree before its reap")
	}
	if !s.Cancel(r.Handle(), "after the result") {
		t.Fatal("cancel found no node")
	}
	if got := result(t, r, 20*time.Second); got.Status != api.StatusCompleted || got.Distillate.Text() != "done" {
		t.Fatalf("result at Done = %+v, want the settled one", got)
	}
	if _, ok := s.Lookup(r.Handle()); ok {
		t.Fatal("the node is still in the tree after its reap")
	}
}

// The second signal: KillAll sends SIGKILL to every group at once, cutting a
// drain that would otherwise wait out its long graces.
func TestKillAllCutsTheDrain(t *testing.T) {
	s, _ := newSupervisor(t, "ignore-term", func(c *Config) {
		c.DrainGrace = time.Minute
		c.KillGrace = time.Minute
	})
	var runs []*Run
	for i := 0; i < 3; i++ {
		runs = append(runs, start(t, s, testPayload("x", time.Hour)))
	}
	for _, r := range runs {
		waitPID(t, r)
	}
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		drained <- s.Shutdown(ctx)
	}()
	testkit.WaitFor(t, 10*time.Second, "three ctrl/cancel rungs", func() bool { return s.Stats().Cancels == 3 })
	s.KillAll()
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("drain after KillAll: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the drain still waits after KillAll")
	}
	for _, r := range runs {
		if res := r.Result(); res.Status != api.StatusCancelled {
			t.Errorf("result = %+v", res)
		}
	}
	wantRungs(t, s, 3, 0, 3)
}
