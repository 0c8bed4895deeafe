package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/agentd/agentd/delegate"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/tasks"
	"github.com/agentd/agentd/telemetry"
)

// observe holds serve's observability settings: the plaintext metrics
// listener and the supervisor's heartbeat.
type observe struct {
	metricsAddr *string
	heartbeat   *time.Duration
}

func addObserve(f *flags) *observe {
	return &observe{
		metricsAddr: f.string("metrics-addr", "AGENT_METRICS_ADDR", "", "a separate plaintext listener serving only /metrics (loopback or in-pod; the main listener serves /metrics to operators)"),
		heartbeat:   f.duration("heartbeat", "AGENT_HEARTBEAT", time.Second, fmt.Sprintf("the supervisor's heartbeat interval; /healthz fails after %d missed beats", supervisor.HeartbeatStale)),
	}
}

// validate checks the settings and names the bad one.
func (o *observe) validate() error {
	if *o.metricsAddr != "" {
		if _, _, err := net.SplitHostPort(*o.metricsAddr); err != nil {
			return usageError("--metrics-addr %q: %v", *o.metricsAddr, err)
		}
	}
	if *o.heartbeat <= 0 || *o.heartbeat > time.Minute {
		return usageError("--heartbeat must be in (0, 1m] (got %s)", *o.heartbeat)
	}
	return nil
}

// checkTracingEnv refuses OTEL_* settings agentd cannot honour (exit 2).
func checkTracingEnv() error {
	if _, err := telemetry.ExportFromEnv(os.Environ()); err != nil {
		return usageError("%v", err)
	}
	return nil
}

// startTracing installs the tracer provider the OTEL_* environment asks for;
// the returned stop flushes it.
func startTracing(ctx context.Context, log *slog.Logger) (stop func(), err error) {
	tp, err := telemetry.Setup(ctx, telemetry.Options{
		Version:    version,
		Log:        log,
		Attributes: []attribute.KeyValue{attribute.String("agentd.role", "supervisor")},
	})
	if err != nil {
		return nil, usageError("%v", err)
	}
	if tp.Export() == telemetry.ExportOTLP {
		log.Info("exporting traces over OTLP/HTTP")
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("traces not flushed", "err", err)
		}
	}, nil
}

// newMetrics builds the registry: A2A request metrics counted as requests are
// served, and the supervisor's, the router's and the engine's own counters
// read at each scrape.
func newMetrics(sup *supervisor.Supervisor, router *delegate.Router, engine *tasks.Engine) *telemetry.Metrics {
	m := telemetry.NewMetrics()
	m.Observe(telemetry.Sources{
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
	return m
}

// startMetrics serves /metrics alone on its own plaintext listener. A serve
// error goes to served.
func startMetrics(addr string, m *telemetry.Metrics, log *slog.Logger, served chan<- error) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	ms := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() {
		if err := ms.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			served <- fmt.Errorf("metrics: %w", err)
		}
	}()
	log.Info("metrics listening", "listen", ln.Addr().String())
	return ms, nil
}
