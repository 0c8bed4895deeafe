package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/store/sqlite"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/server/console"
	"github.com/agentd/agentd/supervisor/blob"
	"github.com/agentd/agentd/supervisor/delegate"
	"github.com/agentd/agentd/supervisor/trigger"
)

// Log messages the e2e tests (and the bench harness) read.
const (
	msgServing          = "serving"
	msgHealthListening  = "health listening"
	msgMetricsListening = "metrics listening"
	msgDrainedCleanly   = "drained cleanly"
)

// service is a built `agentd serve`. buildService opens, in this order:
//
//  1. the tracer provider (flushed last; observe.go);
//  2. the identity source (Workload API or TLS files) and the bearer tokens
//     (identity.go);
//  3. the task store (the state directory's database, or PostgreSQL), which
//     also keeps the stored distillates (taskstore.go);
//  4. the admission control (its bounds derived from the memory limit;
//     admission.go), then the supervisor and its MCP sessions, which start
//     connecting (tree.go, supervisor.go, mcp.go);
//  5. the background context of the heartbeat, the MCP watch and the peers'
//     agent cards;
//  6. the router (local, then one provider per --peer; mesh.go);
//  7. the main listener (listeners.go), then the push sender and the task
//     engine (engine.go), then the front the main listener serves
//     (listeners.go);
//  8. the health and metrics listeners (listeners.go);
//
// and last the standing trigger of --mode (standing.go).
//
// Run serves until the first signal, an a2a.Drain or a listener's failure,
// then shuts down in one order: the drain first (refuse new work, the kill
// ladder over every tree within the budget, the tasks reach their terminal
// state, the main listener stops), then everything above in reverse.
type service struct {
	*tree
	log       *slog.Logger
	budgets   budgets
	id        *identity
	tokens    string    // --bearer-tokens-file, reloaded on SIGHUP
	agents    *declared // --agents, reloaded on SIGHUP; nil without
	closers   closers
	engine    *tasks.Engine
	auditor   tasks.Auditor // the store's audit trail of operator actions; nil if it keeps none
	admission *admission
	drainer   *server.Drainer
	main      *endpoint
	endpoints []*endpoint // main first
	bg        context.Context
	heartbeat time.Duration
	serving   []any // the attributes of the "serving" line
	// standing is the service's own root under its mode (nil without one):
	// it starts with Run and stops first in the drain.
	standing func(context.Context) (api.SubagentResult, error)
	// recover is --recover: what Run does first with the tasks a process
	// before this one left unfinished in the store.
	recover  tasks.RecoverPolicy
	stateDir string // --state-dir, made; "" with --store memory
	// lease, for PostgreSQL replicas, is how often Run looks for the tasks
	// of a replica whose lease expired (half the lease); 0 for none.
	lease time.Duration
	// steps keeps what each tree did for the console's task pages (nil
	// when the store keeps no steps).
	steps tasks.StepStore
}

func buildService(ctx context.Context, c *serveConfig, log *slog.Logger, stderr io.Writer) (_ *service, err error) {
	s := &service{log: log, heartbeat: c.Observe.Heartbeat, recover: c.Store.policy(), tokens: c.Identity.TokensFile}
	defer func() {
		if err != nil {
			s.closers.close()
		}
	}()
	if err := startTracing(ctx, c.Core.Tracing, log, &s.closers); err != nil {
		return nil, err
	}
	id, err := openIdentity(&c.Identity, log)
	if err != nil {
		return nil, err
	}
	s.closers.add(id.close)
	s.id = id

	s.admission, err = openAdmission(&c.Admission, c.WarmPool, log)
	if err != nil {
		return nil, err
	}
	// The stores' byte budgets come out of the supervisor's share of the
	// memory limit admission control reads.
	if s.budgets, err = c.Budgets.resolve(s.admission.derived.Reserve, c.TaskCapacity, c.TaskRetention); err != nil {
		return nil, cli.UsageError("%v (derived from the memory limit: %s)", err, s.admission.derived)
	}

	// The task store, and in it the stored distillates, before the
	// supervisor that keeps them.
	if c.Store.Kind != storeMemory || c.Modes.mode() == trigger.ModeSchedule {
		if s.stateDir, err = c.Store.stateDir(); err != nil {
			return nil, err
		}
	}
	instance := uuid.Must(uuid.NewV7()).String() // on hop lists, and a PostgreSQL replica's runner id
	store, err := openStore(ctx, &c.Store, storeLimits{capacity: c.TaskCapacity, retention: c.TaskRetention, memory: s.budgets.tasks}, instance, log, &s.closers)
	if err != nil {
		return nil, err
	}
	blobs, _ := store.(blob.Backend)
	s.auditor, _ = store.(tasks.Auditor)
	if l, ok := store.(interface{ LeaseTTL() time.Duration }); ok {
		s.lease = l.LeaseTTL() / 2
	}

	if s.agents, err = openAgents(c.AgentsFile, c.Mesh.providers(), log); err != nil {
		return nil, err
	}
	router := &delegate.Router{}
	lineages := &delegate.Lineages{}
	// Every nested subagent is an A2A task too; the observer records them in
	// the engine built below.
	nested := &a2abind.TreeObserver{Log: log}
	childStderr, err := childLogs(c.Core.AggregateLogs, stderr, &s.closers)
	if err != nil {
		return nil, err
	}
	// The console hears of every change of the tree, to push it at once.
	recent := console.NewRecent(0)
	obs := observers{nested, recent}
	if ss, ok := store.(tasks.StepStore); ok {
		// Each tree's steps, in the store (closed after the tree, below).
		rec := console.NewStepRecorder(ss, 0, log)
		s.closers.add(rec.Close)
		s.steps, obs = ss, append(obs, rec)
	}
	s.tree, err = openTree(&c.Core, log, treeOptions{
		observer:      obs,
		delegator:     delegate.Delegator{Router: router, Lineages: lineages},
		warmPool:      c.WarmPool,
		blobRetention: c.TaskRetention, // a stored distillate stays readable as long as its task
		childStderr:   childStderr,
		budget:        s.admission.ctrl,
		blobBackend:   blobs,
		blobs:         s.budgets.blobs,
		maxFrame:      api.FrameLimit(s.budgets.maxMessage), // the frame holds the largest message the front admits
		agentTypes:    s.agentTypes(),
		keyEnv:        s.agents.keyEnv(),
	})
	if err != nil {
		return nil, err
	}
	s.closers.add(s.tree.close)
	if s.agents != nil {
		s.agents.setKeys = s.sup.SetKeyEnv
	}
	bg, stopBg := context.WithCancel(context.Background())
	s.bg = bg
	s.closers.add(stopBg)
	watching, stopWatch := context.WithCancel(bg)
	waitWatch := s.admission.watchMemory(watching, s.sup, &c.Admission, uint64(s.budgets.maxMessage), log)
	s.closers.add(func() { stopWatch(); waitWatch() })
	s.closers.add(startHeapPolicy(log))
	s.closers.add(startQuietRelease(log, quietInterval))

	if err := router.Register(delegate.Local{Sup: s.sup}); err != nil {
		return nil, err
	}
	if err := c.Mesh.registerPeers(bg, router, id.src, log); err != nil {
		return nil, err
	}

	cardURL, err := s.listenMain(c, id.src != nil)
	if err != nil {
		return nil, err
	}
	s.engine = s.openEngine(c, store, router, lineages, cardURL, instance)
	nested.PublicURL = cardURL
	nested.Attach(s.engine)
	if err := s.openFront(c, id, router, recent, cardURL, instance); err != nil {
		return nil, err
	}
	log.Info("budgets", s.budgets.logAttrs()...)
	s.serving = []any{"listen", s.main.ln.Addr().String(), "url", cardURL, "intelligence", c.Core.Intelligence, "identity", id.mode, "instance", instance, "peers", router.Providers()}
	if err := s.openStanding(c, lineages, cardURL, instance); err != nil {
		return nil, err
	}
	return s, nil
}

// Run serves until the first signal (ctx), an a2a.Drain or a listener's
// failure, then drains and closes everything in reverse build order.
func (s *service) Run(ctx context.Context) error {
	defer s.closers.close()
	// Before anything is served: every task a process before this one left
	// unfinished is failed or started again, and the push notifications it
	// had not delivered are queued.
	if _, err := s.engine.Recover(ctx, s.recover); err != nil {
		if errors.Is(err, sqlite.ErrStateDir) {
			// A damaged database: bad config, as it is when Open finds it.
			return cli.UsageError("--state-dir: recover the task store: %v", err)
		}
		return fmt.Errorf("recover the task store: %w", err)
	}
	if s.lease > 0 {
		go s.takeOver(s.bg)
	}
	failed := make(chan error, len(s.endpoints))
	for _, e := range s.endpoints {
		go func() {
			if err := e.serve(); !errors.Is(err, http.ErrServerClosed) {
				failed <- fmt.Errorf("%s: %w", e.name, err)
			}
		}()
	}
	go s.sup.Heartbeat(s.bg, s.heartbeat)
	// MCP servers connect in the background: the service is not ready until
	// every required one has connected once, and each run's root grant is the
	// tools listed when it starts.
	go s.tools.watch(s.bg, s.log)
	s.log.Info(msgServing, s.serving...)
	standingCtx, stopStanding := context.WithCancel(s.bg)
	defer stopStanding()
	standingDone := make(chan struct{})
	if s.standing != nil {
		go func() {
			defer close(standingDone)
			if _, err := s.standing(standingCtx); err != nil && !errors.Is(err, context.Canceled) {
				s.log.Error("the standing trigger stopped", "err", err)
			}
		}()
	} else {
		close(standingDone)
	}

	var err error
	select {
	case <-s.drainer.Requested(): // a2a.Drain
	case <-ctx.Done(): // the first signal
		s.drainer.Start(0)
	case err = <-failed:
		s.log.Error("listener failed: draining", "err", err)
		s.drainer.Start(0)
	}
	// The standing trigger stops first: it starts nothing more, and its
	// running run goes down the kill ladder with every other tree.
	stopStanding()
	if derr := s.drain(); err == nil {
		err = derr
	}
	<-standingDone
	return err
}

// drain refuses new work (the drainer did, when it started), runs the kill
// ladder over every tree within the drain budget, waits for the running
// tasks to reach their terminal state, then stops the main listener. A
// process that would not reap, or tasks still running at the end of the
// budget, make the exit code 143.
func (s *service) drain() error {
	_, _, budget := s.drainer.State()
	s.log.Info("drain started", "budget", budget.String(), "in_flight", s.engine.InFlight())
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	err := s.shutdown(ctx)
	// Running tasks reach their terminal state once their trees are gone.
	_ = s.engine.Wait(ctx)
	shutCtx, cancelShut := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelShut()
	_ = s.main.shutdown(shutCtx)
	if err != nil {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return cli.ExitWith(api.ExitUncleanDrain)
	}
	s.log.Info(msgDrainedCleanly)
	return nil
}

// Reload is SIGHUP: the agents file (--agents) is loaded again, and the
// bearer tokens file is read again (its mode checked
// as at start) and its tokens replace the old ones at once; a file that does
// not load leaves the old tokens in force (a bad agents file, the old
// agents and card). Nothing else is reloaded: the
// other settings are flags and environment variables, which a running
// process cannot be given anew. Each outcome is one log line.
func (s *service) Reload() {
	if s.agents != nil {
		s.agents.reload()
	}
	if s.tokens == "" || s.id == nil || s.id.auth.Tokens == nil {
		s.log.Info("SIGHUP: nothing to reload (no --bearer-tokens-file)")
		return
	}
	t, err := server.LoadTokens(s.tokens)
	if err != nil {
		s.log.Error("SIGHUP: the bearer tokens file did not load; the tokens in force stay", "file", s.tokens, "err", err)
		return
	}
	s.id.auth.Tokens.Replace(t)
	s.log.Info("SIGHUP: bearer tokens reloaded", "file", s.tokens, "tokens", t.Len())
}

// agentTypes is the supervisor's lookup of the agent type a spawn names:
// nil without --agents.
func (s *service) agentTypes() func(string) (*api.AgentType, bool) {
	if s.agents == nil {
		return nil
	}
	return s.agents.typeNamed
}
