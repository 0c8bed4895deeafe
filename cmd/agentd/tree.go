package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/supervisor"
)

// tree is what serve and run share once built: the supervisor, its MCP
// sessions and the drain of its trees. Safe for concurrent use.
type tree struct {
	log    *slog.Logger
	sup    *supervisor.Supervisor
	tools  *toolServers
	budget time.Duration // --drain-timeout

	forced  atomic.Bool // Force was called
	drained atomic.Bool // shutdown ran
}

// openTree builds the supervisor of c and its MCP sessions; close releases
// them.
func openTree(c *coreConfig, log *slog.Logger, opt treeOptions) (*tree, error) {
	sup, tools, err := openSupervisor(c, log, opt)
	if err != nil {
		return nil, err
	}
	return &tree{log: log, sup: sup, tools: tools, budget: c.DrainTimeout}, nil
}

// Force is the second signal: SIGKILL to every process group at once.
func (t *tree) Force() {
	t.forced.Store(true)
	t.sup.KillAll()
}

// shutdown runs the kill ladder over every tree and waits, until ctx ends, for
// every process to be reaped. A process that would not reap makes it exit 143.
func (t *tree) shutdown(ctx context.Context) error {
	t.drained.Store(true)
	err := t.sup.Shutdown(ctx)
	if err != nil {
		t.log.Error("unclean drain", "err", err, "unreaped", t.sup.Unreaped())
		return cli.ExitWith(api.ExitUncleanDrain)
	}
	if t.forced.Load() {
		t.log.Info("drained after SIGKILL")
	}
	return nil
}

// close stops a supervisor whose trees were never drained (a build that failed
// after it started its warm pool, or a run whose root ended), within the drain
// budget, then closes the MCP sessions.
func (t *tree) close() {
	if !t.drained.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), t.budget)
		_ = t.shutdown(ctx)
		cancel()
	}
	t.tools.close()
}
