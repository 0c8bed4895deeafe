package trigger

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor"
)

// The test binary is also the root the supervisor re-execs: with the
// subagent marker set it exits at once, before ctrl/ready, as a broken build
// or a missing library would; with envRealAgent set too it is a real
// subagent (agent.Main).
func TestMain(m *testing.M) {
	if os.Getenv(api.EnvSubagent) != "" {
		if os.Getenv(envRealAgent) != "" {
			os.Exit(agent.Main())
		}
		os.Exit(3)
	}
	goleak.VerifyTestMain(m, testkit.LeakOptions()...)
}

// envRealAgent makes the re-exec'd test binary a real subagent.
const envRealAgent = "TRIGGER_TEST_REAL_AGENT"

// realRunner runs each event as a tree of a real supervisor and remembers the
// pids it started.
type realRunner struct {
	sup *supervisor.Supervisor
	// intelligence is the root's; empty is builtin:demo.
	intelligence string
	// full, if set, is the root's intelligence instead.
	full *api.Intelligence
	// started, if set, hears of each run as it starts.
	started func(Event)

	mu   sync.Mutex
	pids []int
}

func (r *realRunner) Start(ctx context.Context, ev Event) (Run, error) {
	if r.started != nil {
		r.started(ev)
	}
	run, err := r.sup.Start(ctx, supervisor.StartRequest{Payload: api.SpawnPayload{
		Contract:     api.OutputContract{Objective: "crash at start", OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Limits:       api.Limits{MaxSteps: 5, MaxTokens: 1000, Deadline: api.Duration(time.Minute), MaxChildren: 1},
		Intelligence: r.spec(),
	}})
	if err != nil {
		return nil, err
	}
	return realRun{r: run, sup: r.sup, owner: r}, nil
}

func (r *realRunner) spec() api.Intelligence {
	if r.full != nil {
		return *r.full
	}
	if r.intelligence == "" {
		return api.Intelligence{Endpoint: "builtin:demo"}
	}
	none := 0
	return api.Intelligence{Endpoint: r.intelligence, Model: "m", Retries: &none}
}

type realRun struct {
	r     *supervisor.Run
	sup   *supervisor.Supervisor
	owner *realRunner
}

func (r realRun) Done() <-chan struct{} { return r.r.Done() }
func (r realRun) Result() api.SubagentResult {
	res := r.r.Result()
	r.owner.mu.Lock()
	r.owner.pids = append(r.owner.pids, r.r.Info().PID)
	r.owner.mu.Unlock()
	return res
}
func (r realRun) Outcome() supervisor.Outcome { return r.r.Outcome() }
func (r realRun) Cancel(reason string)        { r.sup.Cancel(r.r.Handle(), reason) }

// A loop whose root is a real child that exits before ctrl/ready: each such
// crash weighs 3, so the second opens the breaker (more than 5), and a loop
// that may not wait for an operator ends with ErrBreakerOpen. The governor
// is the supervisor's own: its Breakers show the loop's.
func TestLoopBreakerOpensOnRealCrashBeforeReady(t *testing.T) {
	sup, err := supervisor.New(supervisor.Config{
		Logger:  slog.New(slog.DiscardHandler),
		Restart: supervisor.GovernorConfig{BaseBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sup.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	r := &realRunner{sup: sup}
	l := &Loop{Options: Options{Runner: r, Governor: sup.Governor(), Logger: slog.New(slog.DiscardHandler), StopOnBreaker: true}}
	res, err := l.Run(context.Background())
	if !errors.Is(err, ErrBreakerOpen) || res.Status != api.StatusCrashed || res.Cause != api.CauseExitedWithoutResult {
		t.Fatalf("Run = %+v, %v; want a crash and ErrBreakerOpen", res, err)
	}
	var found bool
	for _, b := range sup.Breakers() {
		if b.Key == LoopKey {
			found = true
			if !b.Open || b.Failures != 6 || b.LastOutcome != "crash_before_ready" {
				t.Fatalf("breaker %+v", b)
			}
		}
	}
	if !found {
		t.Fatalf("no %s breaker in %+v", LoopKey, sup.Breakers())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pids) != 2 {
		t.Fatalf("%d runs, want 2", len(r.pids))
	}
	for _, pid := range r.pids {
		if pid <= 0 || !errors.Is(unix.Kill(-pid, 0), unix.ESRCH) {
			t.Fatalf("process group %d is not gone", pid)
		}
	}
}

// A loop whose every model endpoint is down: each run is a real subagent
// that reports crashed (intelligence_unreachable) and exits 0. Each is an
// outage for the governor: the loop backs off between runs, the wait
// doubling from run to run, and the session's breaker stays closed (where
// it once restarted at once, every run clean, 350 runs in 7s, and then
// opened the breaker, which only an operator could close). The first run
// opens both endpoints' breakers and the supervisor hands their state to
// every later child: no later run calls either endpoint.
func TestLoopBacksOffWhileEveryEndpointIsDown(t *testing.T) {
	var hits [2]atomic.Int64
	var urls [2]string
	for i := range hits {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			http.Error(w, `{"error":{"message":"down"}}`, http.StatusServiceUnavailable)
		}))
		t.Cleanup(s.Close)
		urls[i] = s.URL + "/v1"
	}
	base := 2 * time.Millisecond
	sup, err := supervisor.New(supervisor.Config{
		Logger:  slog.New(slog.DiscardHandler),
		Env:     []string{envRealAgent + "=1"},
		Restart: supervisor.GovernorConfig{BaseBackoff: base, MaxBackoff: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := sup.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	none := 0
	spec := api.Intelligence{Endpoint: urls[0], Model: "a", Retries: &none,
		Breaker:   api.BreakerPolicy{Failures: 1, CoolDown: api.Duration(time.Minute)},
		Fallbacks: []api.Intelligence{{Endpoint: urls[1], Model: "b", Retries: &none}}}
	var delays []time.Duration // the governor's wait before each run after the first
	r := &realRunner{sup: sup, full: &spec, started: func(ev Event) {
		if ev.Seq > 1 {
			b := sup.Governor().Breaker(LoopKey)
			delays = append(delays, b.NextStart.Sub(b.LastAt))
		}
	}}
	const runs = 6
	l := &Loop{Options: Options{Runner: r, Governor: sup.Governor(), Logger: slog.New(slog.DiscardHandler), StopOnBreaker: true}, MaxRuns: runs}
	res, err := l.Run(context.Background())
	if err != nil || res.Status != api.StatusCrashed || res.Cause != api.CauseIntelligenceUnreachable {
		t.Fatalf("Run = %+v, %v; want intelligence_unreachable after %d runs, no breaker", res, err, runs)
	}
	b := sup.Governor().Breaker(LoopKey)
	if b.Open || b.Consecutive != runs || b.Failures != 0 || b.LastOutcome != "outage" {
		t.Fatalf("breaker %+v; want closed, %d outages in a row, none counted as failures", b, runs)
	}
	for i, d := range delays {
		if lo, hi := base<<i, base<<i+base<<i/4; d < lo || d > hi {
			t.Errorf("wait before run %d: %s, want %s to %s (doubling)", i+2, d, lo, hi)
		}
	}
	if len(delays) != runs-1 {
		t.Fatalf("%d waits, want %d", len(delays), runs-1)
	}
	if h0, h1 := hits[0].Load(), hits[1].Load(); h0 != 1 || h1 != 1 {
		t.Fatalf("endpoints called %d and %d times over %d runs; want once each (the first run), the breakers' state handed to later children", h0, h1, runs)
	}
	ib := sup.IntelligenceBreakers()
	if len(ib) != 2 || ib[0].State != api.BreakerOpen || ib[1].State != api.BreakerOpen {
		t.Fatalf("service-wide breakers %+v; want both open", ib)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pids) != runs {
		t.Fatalf("%d runs, want %d", len(r.pids), runs)
	}
	for _, pid := range r.pids {
		if pid <= 0 || !errors.Is(unix.Kill(-pid, 0), unix.ESRCH) {
			t.Fatalf("process group %d is not gone", pid)
		}
	}
}
