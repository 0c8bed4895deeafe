package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func testSources() Sources {
	return Sources{
		Supervisor: func() SupervisorCounts {
			return SupervisorCounts{
				Spawns:   map[string]int64{"local": 3, "peer:b": 1},
				Refusals: map[string]int64{"max_children": 2, "max_depth": 0},
				Verdicts: map[string]int64{"pong_timeout": 1},
				Cancels:  4, Terms: 2, Kills: 1, Unreaped: 0, Orphans: 5, Pings: 10, Pongs: 9,
				TokensIn: 120, TokensOut: 30,
			}
		},
		Live:         func() map[string]int { return map[string]int{"running": 2, "starting": 0, "stopping": 1} },
		BreakersOpen: func() int { return 1 },
		Tasks:        func() map[string]int { return map[string]int{"completed": 4, "working": 1} },
		InFlight:     func() int { return 1 },
		HeartbeatAge: func() time.Duration { return 250 * time.Millisecond },
	}
}

// The collector reads the sources at scrape time and exposes them under
// agent_ names with their bounded labels.
func TestSourceMetrics(t *testing.T) {
	m := NewMetrics()
	m.Observe(testSources())
	want := `
# HELP agent_spawns_total Subagents started, by provider (local, or peer:NAME for a delegation to a remote peer).
# TYPE agent_spawns_total counter
agent_spawns_total{provider="local"} 3
agent_spawns_total{provider="peer:b"} 1
# HELP agent_spawn_refusals_total subagent.spawn requests refused at the chokepoint, by reason.
# TYPE agent_spawn_refusals_total counter
agent_spawn_refusals_total{reason="max_children"} 2
agent_spawn_refusals_total{reason="max_depth"} 0
# HELP agent_kill_ladder_rungs_total Kill-ladder rungs taken: ctrl/cancel frames, SIGTERMs and SIGKILLs sent to a subagent's process group.
# TYPE agent_kill_ladder_rungs_total counter
agent_kill_ladder_rungs_total{rung="cancel"} 4
agent_kill_ladder_rungs_total{rung="sigkill"} 1
agent_kill_ladder_rungs_total{rung="sigterm"} 2
# HELP agent_tokens_total Tokens used by subagents, by direction (in, out).
# TYPE agent_tokens_total counter
agent_tokens_total{direction="in"} 120
agent_tokens_total{direction="out"} 30
# HELP agent_subagents_live Subagents alive now, by state (starting, running, stopping).
# TYPE agent_subagents_live gauge
agent_subagents_live{state="running"} 2
agent_subagents_live{state="starting"} 0
agent_subagents_live{state="stopping"} 1
# HELP agent_tasks A2A tasks held by the task store, by state.
# TYPE agent_tasks gauge
agent_tasks{state="completed"} 4
agent_tasks{state="working"} 1
# HELP agent_governor_breakers_open Restart-governor circuit breakers open now.
# TYPE agent_governor_breakers_open gauge
agent_governor_breakers_open 1
# HELP agent_heartbeat_age_seconds Seconds since the supervisor's last heartbeat (/healthz fails when it is too old).
# TYPE agent_heartbeat_age_seconds gauge
agent_heartbeat_age_seconds 0.25
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		MetricSpawns, MetricSpawnRefusals, MetricLadderRungs, MetricTokens, MetricSubagentsLive, MetricTasks, MetricBreakersOpen, MetricHeartbeatAge); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(m.Registry(), MetricVerdicts, MetricOrphans, MetricPings, MetricPongs, MetricUnreaped, MetricTasksInFlight)
	if err != nil || n != 6 {
		t.Fatalf("%d series, %v; want 6", n, err)
	}
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "agent_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
}

// Every agentd metric is named agent_*; the registry also has the Go runtime
// and process collectors.
func TestMetricNames(t *testing.T) {
	m := NewMetrics()
	m.Observe(testSources())
	m.ObserveRequest("message/send", "ok", time.Millisecond)
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var goSeen, procSeen bool
	for _, mf := range mfs {
		name := mf.GetName()
		switch {
		case strings.HasPrefix(name, "go_"):
			goSeen = true
		case strings.HasPrefix(name, "process_"):
			procSeen = true
		case !strings.HasPrefix(name, "agent_"):
			t.Errorf("metric %s is not named agent_*", name)
		}
	}
	if !goSeen || !procSeen {
		t.Errorf("go collector %v, process collector %v: want both", goSeen, procSeen)
	}
}

func TestMetricsHandler(t *testing.T) {
	m := NewMetrics()
	m.ObserveRequest("tasks/get", "-32001", 3*time.Millisecond)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`agent_a2a_requests_total{code="-32001",method="tasks/get"} 1`,
		`agent_a2a_request_duration_seconds_count{method="tasks/get"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	var nilMetrics *Metrics
	nilMetrics.ObserveRequest("x", "ok", 0) // a nil registry counts nothing
}

func TestCodeLabel(t *testing.T) {
	cases := []struct {
		code   int
		set    bool
		status int
		want   string
	}{
		{0, true, 200, "ok"},
		{-32601, true, 200, "-32601"},
		{0, false, 200, "ok"},
		{0, false, 401, "http_401"},
		{0, false, 413, "http_413"},
		{-32700, true, 413, "-32700"},
	}
	for _, c := range cases {
		if got := CodeLabel(c.code, c.set, c.status); got != c.want {
			t.Errorf("CodeLabel(%d, %v, %d) = %q, want %q", c.code, c.set, c.status, got, c.want)
		}
	}
}

// The admission gauges and counters, when the service has admission control.
func TestAdmissionMetrics(t *testing.T) {
	m := NewMetrics()
	src := testSources()
	src.Admission = func() AdmissionGauges {
		return AdmissionGauges{
			Runs: 3, MaxRuns: 4, Slots: 5, MaxSlots: 8, Processes: 5,
			Queued: map[string]int{"high": 1, "low": 0, "normal": 6}, QueueCapacity: 16, Callers: 2,
			Admitted: 40, Cancelled: 2, Refused: 7,
			Shed:       map[string]int64{"queue_full": 9, "caller_queue_full": 1, "closed": 0},
			RetryAfter: 12 * time.Second,
			Memory:     map[string]uint64{"limit": 1 << 30, "measured": 300 << 20},
			Beyond:     5,
		}
	}
	m.Observe(src)
	want := `
# HELP agent_admission_runs Runs (live subagent trees) holding an admission slot.
# TYPE agent_admission_runs gauge
agent_admission_runs 3
# HELP agent_admission_max_live_runs The bound on runs at once (--max-live-runs).
# TYPE agent_admission_max_live_runs gauge
agent_admission_max_live_runs 4
# HELP agent_admission_live_subagents Process slots in use across the service: one per run's root, one per nested local subagent.
# TYPE agent_admission_live_subagents gauge
agent_admission_live_subagents 5
# HELP agent_admission_max_live_subagents The bound on live subagent processes across the service (--max-live-subagents).
# TYPE agent_admission_max_live_subagents gauge
agent_admission_max_live_subagents 8
# HELP agent_subagent_processes Subagent processes alive now (never more than the process slots in use).
# TYPE agent_subagent_processes gauge
agent_subagent_processes 5
# HELP agent_admission_queued Runs waiting in the admission queue, by priority.
# TYPE agent_admission_queued gauge
agent_admission_queued{priority="high"} 1
agent_admission_queued{priority="low"} 0
agent_admission_queued{priority="normal"} 6
# HELP agent_admission_queue_capacity The admission queue's bound (--queue-capacity).
# TYPE agent_admission_queue_capacity gauge
agent_admission_queue_capacity 16
# HELP agent_admission_shed_total Requests shed past the admission queue (HTTP 429 with Retry-After), by reason (queue_full, caller_queue_full, closed).
# TYPE agent_admission_shed_total counter
agent_admission_shed_total{reason="caller_queue_full"} 1
agent_admission_shed_total{reason="closed"} 0
agent_admission_shed_total{reason="queue_full"} 9
# HELP agent_admission_refused_total Nested spawns refused because the service's process bound was reached.
# TYPE agent_admission_refused_total counter
agent_admission_refused_total 7
# HELP agent_admission_retry_after_seconds The retry-after hint a request shed now would get.
# TYPE agent_admission_retry_after_seconds gauge
agent_admission_retry_after_seconds 12
# HELP agent_admission_beyond_total Runs and nested subagents admitted past the count bounds because the memory measured left room.
# TYPE agent_admission_beyond_total counter
agent_admission_beyond_total 5
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		MetricAdmissionRuns, MetricAdmissionMaxRuns, MetricAdmissionSlots, MetricAdmissionMaxSlots, MetricSubagentProcesses,
		MetricAdmissionQueued, MetricAdmissionQueueCap, MetricAdmissionShed, MetricAdmissionRefused, MetricAdmissionRetryAfter, MetricAdmissionBeyond); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(m.Registry(), MetricAdmissionAdmitted, MetricAdmissionCancelled, MetricAdmissionCallers, MetricAdmissionMemory)
	if err != nil || n != 5 {
		t.Fatalf("%d series, %v; want 5", n, err)
	}
	if problems, err := testutil.GatherAndLint(m.Registry()); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
