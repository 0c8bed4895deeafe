package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/server/console"
	"github.com/agentd/agentd/supervisor/delegate"
	"github.com/agentd/agentd/tlsconfig"
)

// listenMain opens the main listener (--listen, under the connection
// budgets) and returns the URL of the agent card: --public-url, else derived
// from the address listened on (https with TLS on).
func (s *service) listenMain(c *serveConfig, tlsOn bool) (cardURL string, err error) {
	rawLn, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return "", fmt.Errorf("listen on %s: %w", c.Listen, err)
	}
	ln := s.budgets.conns.Listener(rawLn, s.log)
	s.main = &endpoint{name: "serve", ln: ln}
	s.closers.add(s.main.close)
	cardURL = c.PublicURL
	if cardURL == "" {
		scheme := "http://"
		if tlsOn {
			scheme = "https://"
		}
		cardURL = scheme + ln.Addr().String() + "/"
	}
	return cardURL, nil
}

// openFront builds the main listener's server over the engine: the drain
// switch and lame duck, the operator methods, the console and the metrics,
// under the identity's TLS and authentication; then the health and metrics
// listeners, which share its readiness and metrics.
func (s *service) openFront(c *serveConfig, id *identity, router *delegate.Router, recent *console.Recent, cardURL, instance string) error {
	s.drainer = server.NewDrainer(c.Core.DrainTimeout, s.engine.Drain)
	lameDuck := server.NewLameDuck()
	ready := func() bool {
		return id.ready() && !s.drainer.Draining() && lameDuck.Ready() && s.tools.ready()
	}
	metrics := newMetrics(s.sup, router, s.engine, s.admission.ctrl)
	op := &server.Operator{Sup: s.sup, InFlight: s.engine.InFlight, Drain: s.drainer, LameDuck: lameDuck, Admission: s.admission.ctrl,
		Audit: s.auditor, Instance: instance, Log: s.log, Tasks: s.engine, InputTimeout: c.Mesh.InputTimeout}
	var ui *console.Console
	if c.Console {
		ui = newConsole(consoleParts{sup: s.sup, engine: s.engine, lameDuck: lameDuck, recent: recent, admission: s.admission.ctrl, taskCapacity: c.TaskCapacity, steps: s.steps,
			questions: func() []api.PendingQuestion { return op.Questions("") }}, s.log)
	}
	cardCfg := a2abind.CardConfig{
		Name:        "agentd",
		Description: "An A2A mesh service that runs each task as a tree of supervised subagents.",
		URL:         cardURL,
		Version:     version,
		Instance:    instance,
		MaxDepth:    c.Core.Caps.MaxDepth,
		Push:        s.engine.PushEnabled(),
		MutualTLS:   id.src != nil,
		Bearer:      id.auth.JWT || id.auth.Tokens != nil, // a tokens file, even one SIGHUP has yet to fill
	}
	var cardFunc func() *a2a.AgentCard
	if s.agents != nil {
		s.agents.base.Store(&cardCfg)
		cardFunc = s.agents.card
	}
	front := server.Config{
		Handler:    s.engine,
		Card:       a2abind.Card(cardCfg),
		CardFunc:   cardFunc,
		Methods:    poked(op.Methods(), recent),
		Auth:       id.auth,
		Healthy:    s.sup.Healthy,
		Ready:      ready,
		Blobs:      s.sup,
		Metrics:    metrics,
		Console:    consoleHandler(ui),
		Log:        s.log,
		MaxMessage: s.budgets.maxMessage,
		// Before a body is read, the memory its message may cost.
		ReserveMessage: s.admission.ctrl.ReserveMessage,
	}
	s.main.srv = s.budgets.conns.Server(server.Handler(front), s.log)
	s.main.srv.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	var tlsCfg *tls.Config
	if id.src != nil {
		tlsCfg = tlsconfig.ServerConfig(id.src) // ALPN h2 and http/1.1: gRPC rides h2
	}
	// The listener's connections are sorted as they open (server.Split,
	// which sets the HTTP server's protocols: h2c on loopback only): gRPC
	// ones to the binding's own grpc.Server, the rest to the HTTP server,
	// every one under the listener's connection budgets.
	split, err := server.NewSplit(s.main.ln, tlsCfg, s.main.srv, server.GRPCServer(front, s.budgets.conns), s.budgets.conns, s.log)
	if err != nil {
		return err
	}
	s.main.split = split
	if ui != nil {
		// The console's streams end when the listener shuts down (after the
		// drain, whose progress they show), so none holds the shutdown up.
		s.main.srv.RegisterOnShutdown(ui.Close)
		s.closers.add(ui.Close)
	}
	s.endpoints = append(s.endpoints, s.main)
	return s.openSideListeners(c, id, server.ProbeHandler(s.sup.Healthy, ready), metricsHandler(metrics))
}

// openSideListeners opens the listeners of --health-listen (probes, over
// HTTPS with the server certificate only when TLS is on: probes present no
// client certificate) and --metrics-addr (plaintext), when set.
func (s *service) openSideListeners(c *serveConfig, id *identity, probes, metrics http.Handler) error {
	if c.Identity.HealthListen != "" {
		var cfg *tls.Config
		if id.src != nil {
			var err error
			if cfg, err = tlsconfig.HealthConfig(id.src); err != nil {
				return err
			}
		}
		health, err := s.listen("health", c.Identity.HealthListen, probes, cfg)
		if err != nil {
			return err
		}
		s.log.Info(msgHealthListening, "listen", health.ln.Addr().String(), "tls", cfg != nil)
	}
	if c.Observe.MetricsAddr != "" {
		m, err := s.listen("metrics", c.Observe.MetricsAddr, metrics, nil)
		if err != nil {
			return err
		}
		s.log.Info(msgMetricsListening, "listen", m.ln.Addr().String())
	}
	return nil
}

// listen opens a side listener (health, metrics) serving h, over TLS when cfg
// is set.
func (s *service) listen(name, addr string, h http.Handler, cfg *tls.Config) (*endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listen on %s: %w", name, addr, err)
	}
	// The same connection budgets as the main listener: each listener has
	// its own caps.
	e := &endpoint{name: name, ln: s.budgets.conns.Listener(ln, s.log), srv: s.budgets.conns.Server(h, s.log)}
	e.srv.TLSConfig = cfg
	s.closers.add(e.close)
	s.endpoints = append(s.endpoints, e)
	return e, nil
}

// endpoint is an HTTP server on its open listener; the main one's
// connections are sorted between it and the gRPC binding by split.
type endpoint struct {
	name  string // for errors: serve, health, metrics
	ln    net.Listener
	srv   *http.Server
	split *server.Split
}

// serve serves until the server is closed (http.ErrServerClosed).
func (e *endpoint) serve() error {
	if e.split != nil {
		return e.split.Serve()
	}
	if e.srv.TLSConfig != nil {
		return e.srv.ServeTLS(e.ln, "", "")
	}
	return e.srv.Serve(e.ln)
}

// shutdown stops the server gracefully, within ctx.
func (e *endpoint) shutdown(ctx context.Context) error {
	if e.split != nil {
		return e.split.Shutdown(ctx)
	}
	return e.srv.Shutdown(ctx)
}

// close stops the server and closes the listener (which a server that never
// served does not own).
func (e *endpoint) close() {
	if e.split != nil {
		e.split.Close()
		return
	}
	if e.srv != nil {
		e.srv.Close()
	}
	e.ln.Close()
}
