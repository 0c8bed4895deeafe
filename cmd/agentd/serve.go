package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/a2abind"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/delegate"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/tasks"
	"github.com/agentd/agentd/tlsconfig"
)

// maxWarmPool bounds --warm-pool: the pool is a latency cache, not capacity.
const maxWarmPool = 64

// version is the service version the agent card reports.
var version = "0.1.0"

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("serve", stderr, "Runs the A2A mesh service: a supervisor plus the A2A JSON-RPC endpoint.\nPlain http is allowed only on a loopback --listen address.")
	listen := f.string("listen", "AGENT_LISTEN", "127.0.0.1:8080", "address to listen on (host:port)")
	publicURL := f.string("public-url", "AGENT_PUBLIC_URL", "", "the URL peers reach this service at, for the agent card (default derived from --listen)")
	taskCapacity := f.int("task-capacity", "AGENT_TASK_CAPACITY", 10000, "tasks the store holds; finished ones are evicted oldest first")
	taskRetention := f.duration("task-retention", "AGENT_TASK_RETENTION", time.Hour, "how long a finished task stays readable")
	warmPool := f.int("warm-pool", "AGENT_WARM_POOL", 2, "children started ahead of time, waiting for their payload (0 turns the pool off)")
	m := addMesh(f)
	c := addCore(f)
	idf := addIdentity(f)
	obs := addObserve(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("serve takes no arguments (got %q)", f.Args())
	}
	if err := c.validate(); err != nil {
		return err
	}
	if *taskCapacity <= 0 {
		return usageError("--task-capacity must be positive (got %d)", *taskCapacity)
	}
	if *taskRetention <= 0 {
		return usageError("--task-retention must be a positive duration (got %s)", *taskRetention)
	}
	if *warmPool < 0 || *warmPool > maxWarmPool {
		return usageError("--warm-pool must be in [0, %d] (got %d)", maxWarmPool, *warmPool)
	}
	if err := checkPublicURL(*publicURL); err != nil {
		return err
	}
	c.warmPool = *warmPool
	if err := m.validate(); err != nil {
		return err
	}
	if err := obs.validate(); err != nil {
		return err
	}
	if err := checkTracingEnv(); err != nil {
		return err
	}

	log := c.logger(stderr)
	stopTracing, err := startTracing(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	id, err := idf.build(*listen, log)
	if err != nil {
		return err
	}
	if id.src != nil {
		defer id.src.Close()
	}
	c.blobRetention = *taskRetention // a stored distillate stays readable as long as its task
	router := &delegate.Router{}
	lineages := &delegate.Lineages{}
	c.delegator = delegate.Delegator{Router: router, Lineages: lineages}
	// Every nested subagent is an A2A task too; the observer records them in
	// the engine built below.
	nested := &a2abind.TreeObserver{Log: log}
	sup, err := c.newSupervisor(log, nested)
	if err != nil {
		return err
	}
	// MCP servers connect in the background: the service is not ready until
	// every required one has connected once, and each run's root grant is the
	// tools listed when it starts.
	defer c.closeMCP()
	mcpCtx, stopMCP := context.WithCancel(ctx)
	defer stopMCP()
	go c.watchMCP(mcpCtx, log)
	beatCtx, stopBeat := context.WithCancel(context.Background())
	defer stopBeat()
	go sup.Heartbeat(beatCtx, *obs.heartbeat)
	if err := router.Register(delegate.Local{Sup: sup}); err != nil {
		return err
	}
	if err := m.registerPeers(router, id.src, log); err != nil {
		return err
	}
	instance := uuid.Must(uuid.NewV7()).String()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	cardURL := *publicURL
	if cardURL == "" {
		cardURL = "http://" + ln.Addr().String() + "/"
		if id.src != nil {
			cardURL = "https://" + ln.Addr().String() + "/"
		}
	}
	exec := a2abind.NewExecutor(a2abind.ExecutorConfig{
		Router:       router,
		CancelHandle: sup.Cancel,
		Limits:       c.limits(),
		Intelligence: c.intelligenceSpec(),
		Scope:        c.rootScope,
		PublicURL:    cardURL,
		Instance:     instance,
		MaxDepth:     func() int { return sup.Caps().MaxDepth },
		Lineages:     lineages,
		Log:          log,
	})
	store := tasks.NewMemoryStore(*taskCapacity, *taskRetention)
	pusher := tasks.NewPusher(tasks.PushSettings{Policy: tasks.PushPolicy{Allow: m.pushAllow}, Log: log}, store.ListPush)
	defer pusher.Close()
	engine := tasks.NewEngine(store, exec, log, tasks.WithSendWait(*m.sendWait), tasks.WithPusher(pusher))
	nested.PublicURL = cardURL
	nested.Attach(engine)

	drainer := server.NewDrainer(*c.drainTimeout, engine.Drain)
	lameDuck := server.NewLameDuck()
	ready := func() bool {
		return (id.src == nil || id.src.Ready()) && !drainer.Draining() && lameDuck.Ready() && c.mcpReady()
	}
	metrics := newMetrics(sup, router, engine)
	op := &server.Operator{Sup: sup, InFlight: engine.InFlight, Drain: drainer, LameDuck: lameDuck}
	handler := server.Handler(server.Config{
		Handler: engine,
		Card: a2abind.Card(a2abind.CardConfig{
			Name:        "agentd",
			Description: "An A2A mesh service that runs each task as a tree of supervised subagents.",
			URL:         cardURL,
			Version:     version,
			Instance:    instance,
			MaxDepth:    *c.maxDepth,
			Push:        engine.PushEnabled(),
			MutualTLS:   id.src != nil,
			Bearer:      id.auth.JWT || id.auth.Tokens.Len() > 0,
		}),
		Methods: op.Methods(),
		Auth:    id.auth,
		Healthy: sup.Healthy,
		Ready:   ready,
		Blobs:   sup,
		Metrics: metrics,
		Log:     log,
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 2)
	if id.src != nil {
		srv.TLSConfig = tlsconfig.ServerConfig(id.src)
		go func() { served <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { served <- srv.Serve(ln) }()
	}
	health, err := startHealth(*idf.healthListen, id.src, sup.Healthy, ready, log, served)
	if err != nil {
		srv.Close()
		return err
	}
	if health != nil {
		defer health.Close()
	}
	metricsSrv, err := startMetrics(*obs.metricsAddr, metrics, log, served)
	if err != nil {
		srv.Close()
		return err
	}
	if metricsSrv != nil {
		defer metricsSrv.Close()
	}
	log.Info("serving", "listen", ln.Addr().String(), "url", cardURL, "intelligence", *c.intelligence, "identity", id.mode, "instance", instance, "peers", router.Providers())

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	// The first signal and a2a.Drain take the same path: drainer.Start, then
	// the drain below once Requested closes.
	firstSig := make(chan struct{})
	var sawSignal atomic.Bool
	go func() {
		select {
		case sig := <-sigs:
			sawSignal.Store(true)
			if drainer.Start(0) {
				log.Info("draining", "signal", sig.String(), "drain_timeout", c.drainTimeout.String())
			}
		case <-firstSig:
		}
	}()
	select {
	case <-drainer.Requested():
	case err := <-served:
		close(firstSig)
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		drainer.Start(0)
	}
	close(firstSig)
	_, _, budget := drainer.State()
	log.Info("drain started", "budget", budget.String(), "in_flight", engine.InFlight())
	return drain(log, sigs, !sawSignal.Load(), srv, engine, sup, budget)
}

// checkPublicURL checks --public-url: empty (derived from --listen), or an
// absolute http(s) URL without credentials, which peers and clients are given
// in the agent card and in the URLs of stored distillates.
func checkPublicURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return usageError("--public-url %q: want an absolute http(s) URL such as https://agentd.example:8443/", raw)
	}
	return nil
}

// startHealth serves /healthz and /readyz on their own listener: HTTPS with
// the server certificate only (probes present no client certificate) when src
// is set, plain http otherwise. A serve error goes to served.
func startHealth(addr string, src tlsconfig.Source, healthy, ready func() bool, log *slog.Logger, served chan<- error) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health listen on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: server.ProbeHandler(healthy, ready), ReadHeaderTimeout: 5 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	if src != nil {
		cfg, err := tlsconfig.HealthConfig(src)
		if err != nil {
			ln.Close()
			return nil, err
		}
		hs.TLSConfig = cfg
		go func() { report(served, hs.ServeTLS(ln, "", "")) }()
	} else {
		go func() { report(served, hs.Serve(ln)) }()
	}
	log.Info("health listening", "listen", ln.Addr().String(), "tls", src != nil)
	return hs, nil
}

// report passes on a probe listener's failure; a close is no failure.
func report(served chan<- error, err error) {
	if !errors.Is(err, http.ErrServerClosed) {
		served <- fmt.Errorf("health: %w", err)
	}
}

// drain is the first-signal (and a2a.Drain) path: refuse new work, run the kill ladder over
// every tree within the drain budget, then stop serving. A second signal
// collapses to SIGKILL of every process group. A process that would not reap
// makes the exit code 143.
func drain(log *slog.Logger, sigs <-chan os.Signal, noSignalYet bool, srv *http.Server, engine *tasks.Engine, sup *supervisor.Supervisor, budget time.Duration) error {
	engine.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	forced := make(chan struct{})
	go func() {
		if noSignalYet {
			// An a2a.Drain began this drain: the first signal (a pod's
			// termination) is its first, not a second, and forces nothing.
			select {
			case sig := <-sigs:
				log.Info("signal during a drain: already draining", "signal", sig.String())
			case <-ctx.Done():
				return
			}
		}
		select {
		case sig := <-sigs:
			log.Warn("second signal: SIGKILL to every process group", "signal", sig.String())
			sup.KillAll()
			close(forced)
		case <-ctx.Done():
		}
	}()
	err := sup.Shutdown(ctx)
	// Running tasks reach their terminal state once their trees are gone.
	_ = engine.Wait(ctx)
	shutCtx, cancelShut := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelShut()
	_ = srv.Shutdown(shutCtx)
	select {
	case <-forced:
		if err == nil {
			log.Info("drained after SIGKILL")
		}
	default:
	}
	if err != nil {
		log.Error("unclean drain", "err", err, "unreaped", sup.Unreaped())
		return exitWith(api.ExitUncleanDrain)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return exitWith(api.ExitUncleanDrain)
	}
	log.Info("drained cleanly")
	return nil
}
