package trigger

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
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

	mu   sync.Mutex
	pids []int
}

func (r *realRunner) Start(ctx context.Context, ev Event) (Run, error) {
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

// A loop whose model is down: each run is a real subagent that reports
// crashed (intelligence_unreachable) and exits 0. Each counts as a failure for
// the governor, so the loop backs off between them and its breaker opens,
// where it restarted at once, every run clean (350 runs in 7s).
func TestLoopBacksOffWhenTheModelIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	sup, err := supervisor.New(supervisor.Config{
		Logger:  slog.New(slog.DiscardHandler),
		Env:     []string{envRealAgent + "=1"},
		Restart: supervisor.GovernorConfig{BaseBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond},
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
	r := &realRunner{sup: sup, intelligence: down}
	l := &Loop{Options: Options{Runner: r, Governor: sup.Governor(), Logger: slog.New(slog.DiscardHandler), StopOnBreaker: true}, MaxRuns: 20}
	res, err := l.Run(context.Background())
	if !errors.Is(err, ErrBreakerOpen) || res.Status != api.StatusCrashed || res.Cause != api.CauseIntelligenceUnreachable {
		t.Fatalf("Run = %+v, %v; want intelligence_unreachable and ErrBreakerOpen", res, err)
	}
	for _, b := range sup.Breakers() {
		if b.Key == LoopKey && (!b.Open || b.Failures != 6 || b.LastOutcome != "failure") {
			t.Fatalf("breaker %+v", b)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pids) != 6 {
		t.Fatalf("%d runs, want 6 (the sixth failure opens the breaker)", len(r.pids))
	}
}
