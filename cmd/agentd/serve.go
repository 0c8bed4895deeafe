package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	a2abind "github.com/agentd/agentd/a2a"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/delegate"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/supervisor"
)

// version is the service version the agent card reports.
var version = "0.1.0"

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags("serve", stderr, "Runs the A2A mesh service: a supervisor plus the A2A JSON-RPC endpoint.\nPlain http is allowed only on a loopback --listen address.")
	listen := f.string("listen", "AGENT_LISTEN", "127.0.0.1:8080", "address to listen on (host:port)")
	publicURL := f.string("public-url", "AGENT_PUBLIC_URL", "", "the URL peers reach this service at, for the agent card (default derived from --listen)")
	taskCapacity := f.int("task-capacity", "AGENT_TASK_CAPACITY", 10000, "tasks the store holds; finished ones are evicted oldest first")
	taskRetention := f.duration("task-retention", "AGENT_TASK_RETENTION", time.Hour, "how long a finished task stays readable")
	c := addCore(f)
	if err := f.parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return usageError("serve takes no arguments (got %q)", f.Args())
	}
	if err := c.validate(); err != nil {
		return err
	}
	loopback, err := server.IsLoopback(*listen)
	if err != nil {
		return usageError("--listen: %v", err)
	}
	if !loopback {
		return usageError("--listen %s: plain http is only allowed on a loopback address (127.0.0.1, ::1, localhost); configure TLS to listen elsewhere", *listen)
	}
	if *taskCapacity <= 0 {
		return usageError("--task-capacity must be positive (got %d)", *taskCapacity)
	}
	if *taskRetention <= 0 {
		return usageError("--task-retention must be a positive duration (got %s)", *taskRetention)
	}

	log := c.logger(stderr)
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
	router := &delegate.Router{}
	if err := router.Register(delegate.Local{Sup: sup}); err != nil {
		return err
	}
	exec := a2abind.NewExecutor(a2abind.ExecutorConfig{
		Router:       router,
		CancelHandle: sup.Cancel,
		Limits:       c.limits(),
		Intelligence: c.intelligenceSpec(),
		ScopeFunc:    c.rootScope,
		Log:          log,
	})
	engine := a2abind.NewEngine(a2abind.NewStore(*taskCapacity, *taskRetention), exec, log)
	nested.Attach(engine)

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *listen, err)
	}
	url := *publicURL
	if url == "" {
		url = "http://" + ln.Addr().String() + "/"
	}
	var draining atomic.Bool
	handler := server.Handler(server.Config{
		Handler: engine,
		Card: a2abind.Card(a2abind.CardConfig{
			Name:        "agentd",
			Description: "An A2A mesh service that runs each task as a tree of supervised subagents.",
			URL:         url,
			Version:     version,
		}),
		Ready: func() bool { return !draining.Load() && c.mcpReady() },
		Log:   log,
	})
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving", "listen", ln.Addr().String(), "url", url, "intelligence", *c.intelligence)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	select {
	case sig := <-sigs:
		log.Info("draining", "signal", sig.String(), "drain_timeout", c.drainTimeout.String())
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	return drain(log, sigs, srv, engine, sup, *c.drainTimeout)
}

// drain is the first-signal path: refuse new work, run the kill ladder over
// every tree within the drain budget, then stop serving. A second signal
// collapses to SIGKILL of every process group. A process that would not reap
// makes the exit code 143.
func drain(log *slog.Logger, sigs <-chan os.Signal, srv *http.Server, engine *a2abind.Engine, sup *supervisor.Supervisor, budget time.Duration) error {
	engine.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	forced := make(chan struct{})
	go func() {
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
