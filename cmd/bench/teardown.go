package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

var teardownFigure = figure{name: "teardown", run: runTeardown, rows: teardownRows}

// teardownRound is one round of figure 4, in milliseconds.
type teardownRound struct {
	Cooperative float64 `json:"cooperative_ms"` // agentd children: ctrl/cancel suffices
	IgnoreTerm  float64 `json:"ignore_term_ms"` // treechild: only SIGKILL ends them
}

// treeScript makes an agentd root spawn n async children and wait; each child
// makes one step (a tool call, so the supervisor sees it working) and waits.
func treeScript(n int) string {
	var b strings.Builder
	b.WriteString("[depth 0]\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "spawn async \"hold %d\"\n", i+1) // distinct: the same call thrice is loop_detected
	}
	b.WriteString("sleep 1h\n[default]\ncall subagent.status {\"handle\":\"none\"}\nsleep 1h\n")
	return b.String()
}

// treeVariant is one supervisor of figure 4.
type treeVariant struct {
	name    string
	sup     *supervisor.Supervisor
	payload api.SpawnPayload
	size    int
	// rootSteps is the root's step count once it has asked for every child.
	rootSteps int
}

func newTreeVariant(name, exe string, env []string, intelligence string, rootSteps int, cfg Config, log *slog.Logger) (*treeVariant, error) {
	n := cfg.TreeSize
	s, err := supervisor.New(supervisor.Config{
		Executable: exe,
		Env:        append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...),
		Logger:     log,
		Caps:       supervisor.Caps{MaxChildren: n, MaxTotalSubagents: n, MaxInflight: n, SpawnBurst: n, SpawnRate: 1000},
		SpawnReady: 10 * time.Second,
		DrainGrace: cfg.DrainGrace,
		KillGrace:  cfg.KillGrace,
		ReapGrace:  5 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return &treeVariant{name: name, sup: s, size: n, rootSteps: rootSteps, payload: api.SpawnPayload{
		Contract:     api.OutputContract{Objective: "hold a tree", OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Limits:       api.Limits{MaxSteps: n + 10, MaxTokens: 1_000_000, Deadline: api.Duration(10 * time.Minute), MaxChildren: n},
		Intelligence: api.Intelligence{Endpoint: intelligence},
	}}, nil
}

// once grows a tree, cancels it, and returns the time until every process of
// it is reaped.
func (v *treeVariant) once(ctx context.Context) (time.Duration, error) {
	run, err := v.sup.Start(ctx, supervisor.StartRequest{Payload: v.payload})
	if err != nil {
		return 0, err
	}
	var live []supervisor.NodeInfo
	grown := func() bool {
		live = v.sup.Live()
		if len(live) != v.size {
			return false
		}
		for _, n := range live {
			if n.State != supervisor.StateRunning || n.Usage.Steps < 1 || (n.Depth == 0 && n.Usage.Steps < v.rootSteps) {
				return false
			}
		}
		return true
	}
	if err := poll(ctx, 60*time.Second, 2*time.Millisecond, v.name+": tree of "+fmt.Sprint(v.size), grown); err != nil {
		v.sup.Cancel(run.Handle(), "bench setup failed")
		var seen []string
		for _, n := range live {
			seen = append(seen, fmt.Sprintf("%s:%s:%d", n.AgentPath, n.State, n.Usage.Steps))
		}
		select {
		case <-run.Done():
			seen = append(seen, fmt.Sprintf("root ended: %+v", run.Result()))
		default:
		}
		return 0, fmt.Errorf("%w; live nodes (path:state:steps): %v", err, seen)
	}
	t0 := time.Now()
	v.sup.Cancel(run.Handle(), "bench")
	select {
	case <-run.TreeDone():
	case <-time.After(60 * time.Second):
		return 0, fmt.Errorf("%s: tree not reaped within 60s", v.name)
	}
	d := time.Since(t0)
	for _, n := range live {
		if err := unix.Kill(-n.PID, 0); !errors.Is(err, unix.ESRCH) {
			return 0, fmt.Errorf("%s: process group %d left behind: %v", v.name, n.PID, err)
		}
	}
	return d, nil
}

func runTeardown(ctx context.Context, cfg Config, logw io.Writer) (any, error) {
	dir, err := os.MkdirTemp("", "agentd-bench-tree-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "tree.script")
	if err := os.WriteFile(script, []byte(treeScript(cfg.TreeSize-1)), 0o600); err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelError}))
	// The script's root makes one step per spawn; treechild's root reports one
	// step after all of them.
	coop, err := newTreeVariant("cooperative", cfg.Agentd, nil, "builtin:script="+script, cfg.TreeSize-1, cfg, log)
	if err != nil {
		return nil, err
	}
	stubborn, err := newTreeVariant("ignore-term", cfg.TreeChild, []string{fmt.Sprintf("BENCH_TREE_SIZE=%d", cfg.TreeSize)}, "builtin:demo", 1, cfg, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, v := range []*treeVariant{coop, stubborn} {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = v.sup.Shutdown(sctx)
			cancel()
		}
	}()
	var rounds []teardownRound
	for r := 0; r < cfg.Rounds; r++ {
		order := []*treeVariant{coop, stubborn}
		if r%2 == 1 {
			order = []*treeVariant{stubborn, coop}
		}
		var tr teardownRound
		for _, v := range order {
			d, err := v.once(ctx)
			if err != nil {
				return nil, err
			}
			if v == coop {
				tr.Cooperative = ms(d)
			} else {
				tr.IgnoreTerm = ms(d)
			}
		}
		rounds = append(rounds, tr)
		fmt.Fprintf(logw, "bench: teardown round %d: %+v\n", r+1, tr)
	}
	return rounds, nil
}

func teardownRows(raw json.RawMessage, cfg Config) ([]row, error) {
	rounds, err := decodeRounds[teardownRound](raw)
	if err != nil {
		return nil, err
	}
	graces := ms(cfg.DrainGrace + cfg.KillGrace)
	stubborn := medianOf(rounds, func(r teardownRound) float64 { return r.IgnoreTerm })
	return []row{
		{fig: 4, what: fmt.Sprintf("teardown: cancel a tree of %d agentd children (cooperative) until all reaped", cfg.TreeSize),
			p50:   fmtMS(medianOf(rounds, func(r teardownRound) float64 { return r.Cooperative })),
			other: fmt.Sprintf("ctrl/cancel answered within the drain grace (%s)", cfg.DrainGrace)},
		{fig: 4, what: fmt.Sprintf("teardown: cancel a tree of %d children that ignore ctrl/cancel and SIGTERM", cfg.TreeSize),
			p50:   fmtMS(stubborn),
			other: fmt.Sprintf("drain grace %s + kill grace %s, then SIGKILL: %s past the graces", cfg.DrainGrace, cfg.KillGrace, fmtMS(stubborn-graces))},
	}, nil
}
