package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/delegate"
)

// observeConfig is serve's observability settings: the plaintext metrics
// listener and the supervisor's heartbeat.
type observeConfig struct {
	MetricsAddr string
	Heartbeat   time.Duration
}

// maxHeartbeat bounds --heartbeat: /healthz fails after a few missed beats.
const maxHeartbeat = time.Minute

func addObserve(f *cli.Flags, o *observeConfig) {
	f.EnvString(&o.MetricsAddr, "metrics-addr", "AGENT_METRICS_ADDR", "", "a separate plaintext listener serving only /metrics (loopback or in-pod; the main listener serves /metrics to operators)")
	f.EnvDuration(&o.Heartbeat, "heartbeat", "AGENT_HEARTBEAT", time.Second, fmt.Sprintf("the supervisor's heartbeat interval; /healthz fails after %d missed beats", supervisor.HeartbeatStale))
}

// validate checks the settings and names the bad one.
func (o *observeConfig) validate() error {
	if o.MetricsAddr != "" {
		if err := checkAddr("--metrics-addr", o.MetricsAddr); err != nil {
			return err
		}
	}
	if o.Heartbeat <= 0 || o.Heartbeat > maxHeartbeat {
		return fmt.Errorf("--heartbeat must be in (0, %s] (got %s)", maxHeartbeat, o.Heartbeat)
	}
	return nil
}

// startTracing installs the tracer provider the OTEL_* environment (checked
// by Validate) asks for, and adds its flush to cl. A setting that fails here
// (an unreadable OTEL_EXPORTER_OTLP_CERTIFICATE) is bad config.
func startTracing(ctx context.Context, environ []string, log *slog.Logger, cl *closers) error {
	tp, err := telemetry.Setup(ctx, telemetry.Options{
		Version:    version,
		Log:        log,
		Attributes: []attribute.KeyValue{attribute.String("agentd.role", "supervisor")},
		Environ:    environ,
	})
	if err != nil {
		return cli.UsageError("%v", err)
	}
	if tp.Export() == telemetry.ExportOTLP {
		log.Info("exporting traces over OTLP/HTTP")
	}
	cl.add(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("traces not flushed", "err", err)
		}
	})
	return nil
}

// newMetrics builds the registry: A2A request metrics counted as requests are
// served, and the supervisor's, the router's and the engine's own counters
// read at each scrape.
func newMetrics(sup *supervisor.Supervisor, router *delegate.Router, engine *tasks.Engine, adm *admit.Controller) *telemetry.Metrics {
	m := telemetry.NewMetrics()
	var admission func() telemetry.AdmissionGauges
	if adm != nil {
		admission = func() telemetry.AdmissionGauges {
			a := server.AdmissionState(adm, sup)
			g := telemetry.AdmissionGauges{
				Runs: a.Runs, MaxRuns: a.MaxRuns, Slots: a.Slots, MaxSlots: a.MaxLiveSubagents, Processes: a.LiveProcesses,
				Queued: a.QueuedByPriority, QueueCapacity: a.QueueCapacity, Callers: a.Callers,
				Admitted: a.Admitted, Cancelled: a.Cancelled, Refused: a.Refused, Shed: a.Shed,
				RetryAfter: time.Duration(a.RetryAfterSeconds) * time.Second,
			}
			if m := adm.MemoryStats(); m.Limit > 0 {
				g.Beyond = m.Beyond
				g.Memory = map[string]uint64{"limit": m.Limit, "in_use": m.InUse, "self": m.Self, "reserved": m.Reserved, "held": m.Held,
					"estimate": m.Estimate, "fresh": m.Fresh, "measured": m.Measured, "headroom": m.Headroom}
			}
			return g
		}
	}
	m.Observe(telemetry.Sources{
		Admission: admission,
		Supervisor: func() telemetry.SupervisorCounts {
			st := sup.Stats()
			spawns := st.Spawns
			// Delegations to peers are counted by each peer provider.
			for _, name := range router.Providers() {
				if p, ok := router.Provider(name); ok {
					if c, ok := p.(interface{ Started() int64 }); ok {
						spawns[name] = c.Started()
					}
				}
			}
			return telemetry.SupervisorCounts{
				Spawns: spawns, Refusals: st.Refusals, Verdicts: st.Verdicts,
				Cancels: st.Cancels, Terms: st.Terms, Kills: st.Kills,
				Unreaped: st.Unreaped, Orphans: st.Orphans, Pings: st.Pings, Pongs: st.Pongs,
				TokensIn: st.TokensIn, TokensOut: st.TokensOut,
			}
		},
		Live: func() map[string]int {
			out := map[string]int{supervisor.StateStarting: 0, supervisor.StateRunning: 0, supervisor.StateStopping: 0}
			for _, n := range sup.Live() {
				out[n.State]++
			}
			return out
		},
		BreakersOpen: func() int {
			open := 0
			for _, b := range sup.Breakers() {
				if b.Open {
					open++
				}
			}
			return open
		},
		Tasks:        engine.TaskStates,
		InFlight:     engine.InFlight,
		HeartbeatAge: func() time.Duration { return time.Since(sup.LastHeartbeat()) },
	})
	m.ObserveIntelligence(func() telemetry.IntelligenceMetrics { return intelligenceMetrics(sup) })
	return m
}

// metricsHandler serves /metrics alone, for the plaintext metrics listener.
func metricsHandler(m *telemetry.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return mux
}
