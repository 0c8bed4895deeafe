package supervisor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

func init() { helpers["pausable"] = helperPausable }

// helperPausable works until told: ctrl/pause is acknowledged with a loop/event
// of one step (so the test can see it arrived), ctrl/resume then completes the
// run, and ctrl/cancel ends it cancelled.
func helperPausable() int {
	c := helperIO()
	c.start()
	paused := false
	for {
		f, err := c.r.Read()
		if err != nil {
			return 1
		}
		switch f.Method {
		case api.MethodPause:
			paused = true
			_ = c.w.Send(api.MethodEvent, 0, api.LoopEvent{Step: 1, Kind: "paused", UsageDelta: api.Usage{Steps: 1}})
		case api.MethodResume:
			if !paused {
				return 2 // resumed without a pause
			}
			_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("resumed")})
			return 0
		case api.MethodCancel:
			_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText("stopped")})
			return 0
		}
	}
}

// TestPauseHoldsSpawnsAndModelCalls: a pause tells running children to hold,
// holds new spawns without a process, and Resume releases both.
func TestPauseHoldsSpawnsAndModelCalls(t *testing.T) {
	s, _ := newSupervisor(t, "pausable")
	running := start(t, s, testPayload("first", time.Minute))
	waitPID(t, running)

	if n := s.Pause(); n != 1 {
		t.Fatalf("Pause told %d children, want 1", n)
	}
	if !s.Paused() {
		t.Fatal("not paused after Pause")
	}
	testkit.WaitFor(t, 10*time.Second, "the running child's first step", func() bool { return running.Info().Usage.Steps == 1 }) // ctrl/pause arrived
	if n := s.Pause(); n != 0 {
		t.Fatalf("a second Pause told %d children, want 0", n)
	}

	held := start(t, s, testPayload("second", time.Minute))
	testkit.WaitFor(t, 10*time.Second, "the run held", func() bool { return s.Held()[held.Handle()] })
	if in := held.Info(); in.PID != 0 || in.State != StateStarting {
		t.Fatalf("held spawn has pid %d, state %s", in.PID, in.State)
	}

	// Resume: one child told, one held spawn released.
	if n := s.Resume(); n != 2 {
		t.Fatalf("Resume affected %d, want 2", n)
	}
	if res := result(t, running, 10*time.Second); res.Status != api.StatusCompleted || res.Distillate.Text() != "resumed" {
		t.Fatalf("paused child's result = %+v", res)
	}
	pid := waitPID(t, held) // the held spawn now has its process
	if pid <= 0 {
		t.Fatalf("released spawn pid %d", pid)
	}
	if n := s.Resume(); n != 0 {
		t.Fatalf("a second Resume affected %d, want 0", n)
	}
	s.Cancel(held.Handle(), "test")
	if res := result(t, held, 10*time.Second); res.Status != api.StatusCancelled {
		t.Fatalf("released spawn's result = %+v", res)
	}
}

// TestPauseCountsAChildToldByItsOwnGoroutine pins a race: a child whose
// payload has just been delivered is told of a pause by its own supervising
// goroutine (syncPause after the payload), which may send ctrl/pause between
// the state change and Pause's loop over the children. The child was told of
// this pause all the same, and Pause counts it.
func TestPauseCountsAChildToldByItsOwnGoroutine(t *testing.T) {
	s, _ := newSupervisor(t, "pausable")
	running := start(t, s, testPayload("first", time.Minute))
	waitPID(t, running)
	n := running.n
	ch := s.changePause(true)
	if !s.syncPause(n, n.getProc()) { // the supervising goroutine wins
		t.Fatal("the child's own goroutine did not tell it of the pause")
	}
	if told := s.tellPause(ch); told != 1 {
		t.Fatalf("Pause counted %d children, want 1 (told by its own goroutine)", told)
	}
	testkit.WaitFor(t, 10*time.Second, "the running child's first step", func() bool { return running.Info().Usage.Steps == 1 }) // ctrl/pause arrived once
	if n := s.Pause(); n != 0 {
		t.Fatalf("a second Pause told %d children, want 0", n)
	}
	if n := s.Resume(); n != 1 {
		t.Fatalf("Resume affected %d, want 1", n)
	}
	if res := result(t, running, 10*time.Second); res.Status != api.StatusCompleted {
		t.Fatalf("result = %+v", res)
	}
}

// TestHeldSpawnEndsWithoutAProcess: a held spawn that is cancelled, drained or
// reaches its deadline ends at once, never forked.
func TestHeldSpawnEndsWithoutAProcess(t *testing.T) {
	s, _ := newSupervisor(t, "pausable")
	s.Pause()
	cancelled := start(t, s, testPayload("cancel me", time.Minute))
	expiring := start(t, s, testPayload("expire", 100*time.Millisecond))
	testkit.WaitFor(t, 10*time.Second, "the run held", func() bool { return s.Held()[cancelled.Handle()] })
	if !s.Cancel(cancelled.Handle(), "operator") {
		t.Fatal("Cancel did not find the held spawn")
	}
	if res := result(t, cancelled, 5*time.Second); res.Status != api.StatusCancelled {
		t.Fatalf("cancelled held spawn: %+v", res)
	}
	if res := result(t, expiring, 5*time.Second); res.Status != api.StatusDeadline {
		t.Fatalf("expired held spawn: %+v", res)
	}
	drained := start(t, s, testPayload("drain me", time.Minute))
	testkit.WaitFor(t, 10*time.Second, "the run held", func() bool { return s.Held()[drained.Handle()] })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if res := result(t, drained, time.Second); res.Status != api.StatusCancelled {
		t.Fatalf("drained held spawn: %+v", res)
	}
	for _, r := range []*Run{cancelled, expiring, drained} {
		if pid := r.Info().PID; pid != 0 {
			t.Errorf("held spawn %s got a process (pid %d)", r.Handle(), pid)
		}
	}
}

// TestPauseThenResumeBeforeSpawnSendsNothing: a child started after a pause
// was lifted is never told anything (the helper exits 2 on a stray resume) until
// the next pause.
func TestPauseThenResumeBeforeSpawnSendsNothing(t *testing.T) {
	s, _ := newSupervisor(t, "pausable")
	s.Pause()
	s.Resume()
	r := start(t, s, testPayload("never paused", time.Minute))
	waitPID(t, r)
	if n := s.Pause(); n != 1 {
		t.Fatalf("Pause told %d, want 1", n)
	}
	testkit.WaitFor(t, 10*time.Second, "the first step", func() bool { return r.Info().Usage.Steps == 1 })
	s.Resume()
	if res := result(t, r, 10*time.Second); res.Status != api.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
}

// Regression: the ChildDeadline cap (Detector A) was applied only once a spawn
// had passed the pause, so a held spawn waited out its payload's whole
// deadline. A held spawn ends at its capped deadline, never forked.
func TestHeldSpawnEndsAtTheCappedDeadline(t *testing.T) {
	s, _ := newSupervisor(t, "pausable", func(c *Config) { c.ChildDeadline = 100 * time.Millisecond })
	s.Pause()
	r := start(t, s, testPayload("held", time.Hour))
	if d := r.Info().Deadline; time.Until(d) > time.Minute {
		t.Fatalf("deadline in %s, want the 100ms cap", time.Until(d))
	}
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusDeadline || !strings.Contains(res.Detail, "100ms") {
		t.Fatalf("result = %+v", res)
	}
	if pid := r.Info().PID; pid != 0 {
		t.Fatalf("held spawn got a process (pid %d)", pid)
	}
}
