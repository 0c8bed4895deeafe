package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

func withPool(n int) func(*Config) {
	return func(c *Config) {
		c.WarmPool = n
		// Refill backoffs in milliseconds.
		c.Restart.BaseBackoff = time.Millisecond
		c.Restart.MaxBackoff = 5 * time.Millisecond
	}
}

// waitIdle polls until the pool holds n ready children and returns their pids.
func waitIdle(t *testing.T, s *Supervisor, n int) []int {
	t.Helper()
	testkit.WaitFor(t, 10*time.Second, "idle pool children", func() bool { return s.Pool().Idle == n })
	return s.pool.idlePIDs()
}

// groupsGone checks that every process group led by pids is gone.
func groupsGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		testkit.WaitGroupGone(t, pid)
	}
}

// A spawn takes a child the pool started before the request: it runs the
// payload, its log is retagged with the node's run_id and agent_path, and the
// pool refills with a new child. Idle children are no subagents.
func TestPoolAssignsWarmChild(t *testing.T) {
	s, logs := newSupervisor(t, "complete", withPool(2))
	before := waitIdle(t, s, 2)
	if live := s.Live(); len(live) != 0 {
		t.Fatalf("idle pool children listed as subagents: %+v", live)
	}
	r := start(t, s, testPayload("say hi", time.Minute))
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "echo: say hi" {
		t.Fatalf("result = %+v", res)
	}
	pid := r.Info().PID
	if !slices.Contains(before, pid) {
		t.Fatalf("the run's child %d was not one of the pool's %v", pid, before)
	}
	if r.Outcome() != OutcomeClean {
		t.Fatalf("outcome = %s, want clean", r.Outcome())
	}
	testkit.WaitFor(t, 10*time.Second, "the forwarded line", func() bool { return strings.Contains(logs.String(), `"msg":"helper working"`) })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"helper working"`) &&
			(!strings.Contains(line, `"run_id":"run-test"`) || !strings.Contains(line, `"agent_path":"0"`)) {
			t.Fatalf("a warm child's forwarded line lacks the node's tags: %s", line)
		}
	}
	// Refilled: two idle children again, one of them new.
	var after []int
	testkit.WaitFor(t, 10*time.Second, "the pool refilled with a new child", func() bool {
		after = s.pool.idlePIDs()
		return len(after) == 2 && !slices.Contains(after, pid)
	})
	fresh := 0
	for _, p := range after {
		if !slices.Contains(before, p) {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("pool before %v, after %v: want exactly one new child", before, after)
	}
	st := s.Pool()
	if st.Assigned != 1 || st.Cold != 0 || st.Size != 2 {
		t.Fatalf("pool stats = %+v", st)
	}
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	groupsGone(t, append(before, after...))
}

// A short run's place in the pool is refilled at its child's reap, not
// after the refill delay (an hour here): its refill follows its answer
// instead of landing on the next request.
func TestPoolRefillsAtTheTakenChildsReap(t *testing.T) {
	s, _ := newSupervisor(t, "complete", withPool(2))
	s.pool.delay = time.Hour
	before := waitIdle(t, s, 2)
	r := start(t, s, testPayload("say hi", time.Minute))
	if res := result(t, r, 10*time.Second); res.Status != api.StatusCompleted {
		t.Fatalf("result = %+v", res)
	}
	var after []int
	testkit.WaitFor(t, 10*time.Second, "the pool refilled after the reap", func() bool {
		after = s.pool.idlePIDs()
		return len(after) == 2 && !slices.Contains(after, r.Info().PID)
	})
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	groupsGone(t, append(before, after...))
}

// A long run does not keep its place empty: the pool refills after the
// delay while the taken child still works.
func TestPoolRefillsAfterTheDelayWhileTheChildWorks(t *testing.T) {
	s, _ := newSupervisor(t, "busy", withPool(1), withEnv(envBusy+"=1m"))
	s.pool.delay = time.Millisecond
	before := waitIdle(t, s, 1)
	r := start(t, s, testPayload("work", time.Minute))
	running := waitPID(t, r)
	var after []int
	testkit.WaitFor(t, 10*time.Second, "the pool refilled while the run works", func() bool {
		after = s.pool.idlePIDs()
		return len(after) == 1 && after[0] != running
	})
	if isDone(r) {
		t.Fatal("the run ended before the check")
	}
	s.Cancel(r.Handle(), "test over")
	if res := result(t, r, 10*time.Second); res.Status != api.StatusCancelled {
		t.Fatalf("result = %+v", res)
	}
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	groupsGone(t, append(append(before, after...), running))
}

// A drain kills idle children at once and waits for their reap: it returns
// clean, takes no kill-ladder rung, and leaves no process behind.
func TestPoolDrainedOnShutdown(t *testing.T) {
	s, _ := newSupervisor(t, "complete", withPool(3))
	pids := waitIdle(t, s, 3)
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	// Shutdown returned after the reap: the pids are gone already.
	for _, pid := range pids {
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			t.Errorf("pool child %d still exists after Shutdown: %v", pid, err)
		}
	}
	groupsGone(t, pids)
	wantRungs(t, s, 0, 0, 0)
	if st := s.Pool(); st.Idle != 0 || st.Starting != 0 {
		t.Fatalf("pool after drain = %+v", st)
	}
	if _, err := s.Start(context.Background(), StartRequest{Payload: testPayload("late", time.Minute)}); !errors.Is(err, ErrDraining) {
		t.Fatalf("start after drain: %v", err)
	}
}

// KillAll (the second signal) takes the pool's children down with the trees.
func TestPoolKilledByKillAll(t *testing.T) {
	s, _ := newSupervisor(t, "cooperative", withPool(2))
	pids := waitIdle(t, s, 2)
	r := start(t, s, testPayload("work", time.Minute))
	running := waitPID(t, r)
	s.KillAll()
	res := result(t, r, 10*time.Second)
	if res.Status == api.StatusCompleted {
		t.Fatalf("result after KillAll = %+v", res)
	}
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	groupsGone(t, append(s.pool.idlePIDs(), append(pids, running)...))
}

// An idle child that dies is counted by the governor and replaced.
func TestPoolReplacesDeadIdleChild(t *testing.T) {
	s, _ := newSupervisor(t, "complete", withPool(2))
	pids := waitIdle(t, s, 2)
	victim := pids[0]
	if err := unix.Kill(victim, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the victim replaced", func() bool {
		now := s.pool.idlePIDs()
		return s.Pool().Replaced == 1 && len(now) == 2 && !slices.Contains(now, victim)
	})
	var st BreakerState
	for _, b := range s.Breakers() {
		if b.Key == PoolKey {
			st = b
		}
	}
	if st.Failures != 1 || st.Open {
		t.Fatalf("pool breaker = %+v, want one failure, closed", st)
	}
	after := s.pool.idlePIDs()
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	groupsGone(t, append(pids, after...))
}

// A binary that crashes before ctrl/ready opens the pool's breaker after two
// refills (weight 3 each, more than 5): refills stop, spawns re-exec cold and
// still work, and closing the breaker resumes refills before its cool-down
// (an hour here) is over.
func TestPoolBrokenBinaryOpensBreaker(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "starts")
	s, _ := newSupervisor(t, "flaky-start", withPool(2), withEnv(envCounter+"="+counter, envCrashes+"=2"),
		func(c *Config) { c.Restart.CoolDown = time.Hour })
	testkit.WaitFor(t, 10*time.Second, "the breaker open", func() bool { return s.Pool().BreakerOpen })
	st := s.Pool()
	if st.Failed != 2 || st.Idle != 0 || st.Starting != 0 {
		t.Fatalf("pool with an open breaker = %+v, want 2 failed refills and no children", st)
	}
	starts := func() int64 {
		fi, err := os.Stat(counter)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if n := starts(); n != 2 {
		t.Fatalf("%d starts with the breaker open, want 2", n)
	}
	// The binary works now; a spawn falls back to a cold re-exec.
	r := start(t, s, testPayload("cold", time.Minute))
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "echo: cold" {
		t.Fatalf("cold spawn with the breaker open: %+v", res)
	}
	if n := starts(); n != 3 {
		t.Fatalf("%d starts after one cold spawn, want 3 (no refill while the breaker is open)", n)
	}
	if st := s.Pool(); st.Cold != 1 || st.Assigned != 0 {
		t.Fatalf("pool stats = %+v, want one cold spawn", st)
	}
	// An operator closes the breaker: the pool refills.
	if !s.CloseBreaker(PoolKey) {
		t.Fatal("CloseBreaker: pool key unknown")
	}
	pids := waitIdle(t, s, 2)
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	groupsGone(t, append(pids, r.Info().PID))
}

// A negative pool size is a configuration error.
func TestPoolNegativeSizeRefused(t *testing.T) {
	if _, err := New(Config{WarmPool: -1}); err == nil {
		t.Fatal("New accepted a negative warm pool")
	}
}

// Back from a transient fault without an operator: the breaker opens after two
// crashed refills, half-opens after its cool-down for one trial refill, which
// crashes too and re-opens it for twice as long; the next trial reaches
// ctrl/ready, the breaker closes and the pool fills again.
func TestPoolBreakerHalfOpensAfterCoolDown(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "starts")
	s, logs := newSupervisor(t, "flaky-start", withPool(2), withEnv(envCounter+"="+counter, envCrashes+"=3"), func(c *Config) {
		c.Restart.CoolDown = 40 * time.Millisecond
		c.Restart.MaxCoolDown = time.Second
		c.Restart.Rand = fixedRand(0)
	})
	pids := waitIdle(t, s, 2)
	st := s.Pool()
	if st.Failed != 3 || st.BreakerOpen || st.Breaker.State != BreakerClosed || st.Breaker.Failures != 0 || st.Breaker.Since.IsZero() {
		t.Fatalf("pool after recovering = %+v", st)
	}
	fi, err := os.Stat(counter)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 5 { // two crashes, a failed trial, a good trial, one more refill
		t.Fatalf("%d starts, want 5", fi.Size())
	}
	out := logs.String()
	opened := strings.Index(out, `"msg":"restart breaker open","key":"warm-pool","failures":6,"window":"1m0s","opening":1,"cool_down":"40ms"`)
	reopened := strings.Index(out, `"opening":2,"cool_down":"80ms"`)
	closed := strings.Index(out, "the trial refill reached ctrl/ready: breaker closed, refills resume")
	if opened < 0 || reopened < opened || closed < reopened {
		t.Fatalf("want open (40ms), re-open (80ms), close in that order in the log:\n%s", out)
	}
	if n := strings.Count(out, "warm pool: breaker half-open: one trial refill"); n != 2 {
		t.Fatalf("%d trial refills, want 2", n)
	}
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	groupsGone(t, pids)
}

// A payload whose spawn frame would be over the frame limit is refused
// before a child is taken for it (a warm child handed a frame it cannot read
// was lost, and the task ended crashed): Start fails with
// api.ErrFrameTooLarge, the warm child stays idle and runs the next payload;
// children are told the limit.
func TestPayloadOverFrameLimitKeepsWarmChild(t *testing.T) {
	s, _ := newSupervisor(t, "complete", withPool(1), func(c *Config) { c.MaxFrame = 4096 })
	idle := waitIdle(t, s, 1)
	if !slices.Contains(s.env.Load().vars, api.EnvMaxFrame+"=4096") {
		t.Fatalf("the children are not told the frame limit: %v", s.env.Load().vars)
	}
	_, err := s.Start(context.Background(), StartRequest{Payload: testPayload(strings.Repeat("x", 8192), time.Minute)})
	if !errors.Is(err, api.ErrFrameTooLarge) || !strings.Contains(err.Error(), "limit 4096") {
		t.Fatalf("an 8 KiB objective in a 4 KiB frame: %v", err)
	}
	if got := s.pool.idlePIDs(); !slices.Equal(got, idle) || s.Pool().Assigned != 0 {
		t.Fatalf("the pool was touched: idle %v, was %v; %+v", got, idle, s.Pool())
	}
	r := start(t, s, testPayload("small", time.Minute))
	if res := result(t, r, 10*time.Second); res.Status != api.StatusCompleted || r.Info().PID != idle[0] {
		t.Fatalf("the next payload: %+v on pid %d, the warm child was %d", res, r.Info().PID, idle[0])
	}
}

// The supervisor sets every agentd child's Go memory limit, GOGC and
// GOMAXPROCS (Config.ChildMemoryLimit, ChildGOGC, ChildGOMAXPROCS), replacing
// the ones its own environment carries, and leads its GODEBUG with
// Config.ChildGODEBUG, the environment's after it (so the operator's wins
// where both set one): a cold child and a pooled one run with them.
func TestChildGCSettingsFromSupervisor(t *testing.T) {
	for _, pool := range []int{0, 1} {
		s, _ := newSupervisor(t, "gcenv", withPool(pool), func(c *Config) {
			c.Env = append(c.Env, "GOMEMLIMIT=1GiB", "GOGC=400", "GOMAXPROCS=3", "GODEBUG=profstackdepth=64")
			c.ChildMemoryLimit = 12 << 20
			c.ChildGOGC = 75
			c.ChildGOMAXPROCS = 1
			c.ChildGODEBUG = "memprofilerate=0,profstackdepth=0"
		})
		if pool > 0 {
			waitIdle(t, s, pool)
		}
		r := start(t, s, testPayload("gc", time.Minute))
		res := result(t, r, 10*time.Second)
		if want := fmt.Sprintf("limit=%d gogc=75 procs=1 memprofilerate=0 godebug=memprofilerate=0,profstackdepth=0,profstackdepth=64", 12<<20); res.Status != api.StatusCompleted || res.Distillate.Text() != want {
			t.Fatalf("pool %d: the child ran with %q (%s), want %q", pool, res.Distillate.Text(), res.Status, want)
		}
	}
}

// Config.ChildGODEBUG leads a child's GODEBUG, the operator's after it, or
// stands alone; without it the operator's GODEBUG passes as it is.
func TestChildGODEBUGBeforeTheOperators(t *testing.T) {
	for _, c := range []struct {
		env     []string
		godebug string
		want    string // the child's GODEBUG entry, "" for none
	}{
		{[]string{"PATH=/bin", "GODEBUG=madvdontneed=1"}, "memprofilerate=0", "GODEBUG=memprofilerate=0,madvdontneed=1"},
		{[]string{"PATH=/bin"}, "memprofilerate=0", "GODEBUG=memprofilerate=0"},
		{[]string{"PATH=/bin", "GODEBUG="}, "memprofilerate=0", "GODEBUG=memprofilerate=0"},
		{[]string{"PATH=/bin", "GODEBUG=madvdontneed=1"}, "", "GODEBUG=madvdontneed=1"},
		{[]string{"PATH=/bin"}, "", ""},
	} {
		env := childGC(c.env, 0, 0, 0, c.godebug)
		var got []string
		for _, kv := range env {
			if strings.HasPrefix(kv, "GODEBUG=") {
				got = append(got, kv)
			}
		}
		if (c.want == "" && len(got) != 0) || (c.want != "" && !slices.Equal(got, []string{c.want})) || !slices.Contains(env, "PATH=/bin") {
			t.Errorf("childGC(%q, godebug %q) = %q, want GODEBUG %q once and PATH kept", c.env, c.godebug, env, c.want)
		}
	}
}

// rehearsedPIDs returns the pids of the pool children that logged a
// ctrl/rehearse (helperRehearser), in the order of their lines.
func rehearsedPIDs(logs *testkit.Buffer) []int {
	var out []int
	for _, r := range logs.Records("helper rehearsed") {
		pid, _ := r["helper_pid"].(float64)
		out = append(out, int(pid))
	}
	return out
}

// With PoolRehearse, only the pool's next child in line (the oldest ready
// one, which a take hands out) is sent ctrl/rehearse, once; after a take
// the child that moved up is sent it. Every child of the pool rehearsed on
// its own, each about 150 KiB larger while it waited (figure 9).
func TestPoolRehearsesOnlyItsNextChild(t *testing.T) {
	s, logs := newSupervisor(t, "rehearser", withPool(3), func(c *Config) { c.PoolRehearse = true })
	before := waitIdle(t, s, 3)
	testkit.WaitFor(t, 10*time.Second, "the head's rehearsal", func() bool { return len(rehearsedPIDs(logs)) > 0 })
	if got := rehearsedPIDs(logs); !slices.Equal(got, before[:1]) {
		t.Fatalf("pool %v (oldest first): rehearsed %v, want only its head", before, got)
	}
	r := start(t, s, testPayload("take the head", time.Minute))
	if res := result(t, r, 10*time.Second); res.Status != api.StatusCompleted || res.Distillate.Text() != "rehearsals=1" {
		t.Fatalf("result = %+v", res)
	}
	if pid := r.Info().PID; pid != before[0] {
		t.Fatalf("the take handed out %d, want the head %d", pid, before[0])
	}
	testkit.WaitFor(t, 10*time.Second, "the new head's rehearsal", func() bool { return len(rehearsedPIDs(logs)) > 1 })
	var after []int
	testkit.WaitFor(t, 10*time.Second, "the pool refilled", func() bool {
		after = s.pool.idlePIDs()
		return len(after) == 3 && !slices.Contains(after, before[0])
	})
	if got := rehearsedPIDs(logs); !slices.Equal(got, before[:2]) || after[0] != before[1] {
		t.Fatalf("pool %v, then %v: rehearsed %v, want %v", before, after, got, before[:2])
	}
	// The new head runs its payload after its one rehearsal.
	r2 := start(t, s, testPayload("take the next", time.Minute))
	if res := result(t, r2, 10*time.Second); res.Status != api.StatusCompleted || res.Distillate.Text() != "rehearsals=1" || r2.Info().PID != before[1] {
		t.Fatalf("second take: child %d, result %+v", r2.Info().PID, res)
	}
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	groupsGone(t, append(before, after...))
}

// headRehearsed reports whether the pool's head has been sent ctrl/rehearse.
func headRehearsed(pl *pool) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.idle) > 0 && pl.idle[0].rehearsed
}

// After a take, the child that moved up is sent ctrl/rehearse only once the
// taken child is reaped (or the refill delay, an hour here, has passed): a
// rehearsal beside the taken child's first step slowed it (figure 1's warm
// spawn p50 0.7 to 1.2 ms on two loaded cores).
func TestPoolRehearsesTheNextChildAfterTheTakenOnesReap(t *testing.T) {
	s, logs := newSupervisor(t, "rehearser", withPool(2), func(c *Config) { c.PoolRehearse = true })
	s.pool.delay = time.Hour
	before := waitIdle(t, s, 2)
	testkit.WaitFor(t, 10*time.Second, "the head's rehearsal", func() bool { return len(rehearsedPIDs(logs)) > 0 })
	r := start(t, s, testPayload("hold", time.Minute))
	testkit.WaitFor(t, 10*time.Second, "the taken child running", func() bool { return len(logs.Records("helper holding")) > 0 })
	if r.Info().PID != before[0] {
		t.Fatalf("the take handed out %d, want the head %d", r.Info().PID, before[0])
	}
	if headRehearsed(s.pool) {
		t.Fatal("the new head was sent ctrl/rehearse while the taken child runs")
	}
	testkit.WaitFor(t, 10*time.Second, "the cancel taken", func() bool { return s.Cancel(r.Handle(), "test") })
	if res := result(t, r, 10*time.Second); res.Status != api.StatusCancelled {
		t.Fatalf("result = %+v", res)
	}
	testkit.WaitFor(t, 10*time.Second, "the new head's rehearsal after the reap", func() bool { return len(rehearsedPIDs(logs)) > 1 })
	if got := rehearsedPIDs(logs); !slices.Equal(got, before) {
		t.Fatalf("pool %v: rehearsed %v", before, got)
	}
}
