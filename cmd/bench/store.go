package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/store/postgres"
	"github.com/agentd/agentd/a2a/store/sqlite"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/server"
)

// Figure 6: message/send through agentd's front (as figure 2 measures it:
// mTLS keep-alive, the instant provider) on each task store, side by side:
// memory, the embedded SQLite store and PostgreSQL (a server started for the
// figure with its durable defaults, fsync and synchronous commits on).

const roleStoreAgentd = "store-agentd"

// The store role's settings.
const (
	envStoreKind    = "AGENTD_BENCH_STORE"
	envStoreDSN     = "AGENTD_BENCH_STORE_DSN"
	envStoreDir     = "AGENTD_BENCH_STORE_DIR"
	envStorePreload = "AGENTD_BENCH_STORE_PRELOAD"
)

var storeFigure = figure{name: "store", run: runStore, rows: storeRows}

// storeKinds are the stores of figure 6, in table order.
var storeKinds = []string{"memory", "sqlite", "postgres"}

// storeRound is one round: each store at concurrency 1 and 16, by
// "KIND/CONC".
type storeRound map[string]loadResult

// storeCapacity is each store's capacity in figure 6: above what it holds
// and what the figure adds, so nothing is evicted.
const storeCapacity = 400000

// serveStoreAgentd serves agentd's front over the store its environment
// names, preloaded with that many completed tasks.
func serveStoreAgentd(ctx context.Context, cfg Config) error {
	src, ln, err := roleListen(os.Getenv(envCertDir))
	if err != nil {
		return err
	}
	var st tasks.Store
	switch kind := os.Getenv(envStoreKind); kind {
	case "memory":
		st = tasks.NewMemoryStore(storeCapacity, time.Hour)
	case "sqlite":
		s, err := sqlite.Open(ctx, os.Getenv(envStoreDir), sqlite.Options{Capacity: storeCapacity, Retention: time.Hour})
		if err != nil {
			return err
		}
		defer s.Close()
		st = s
	case "postgres":
		s, err := postgres.Open(ctx, os.Getenv(envStoreDSN), postgres.Options{Capacity: storeCapacity, Retention: time.Hour})
		if err != nil {
			return err
		}
		defer s.Close()
		st = s
	default:
		return fmt.Errorf("no store %q", kind)
	}
	n, _ := strconv.Atoi(os.Getenv(envStorePreload))
	if err := preload(ctx, st, n); err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	url := "https://" + ln.Addr().String() + "/"
	engine := newInstantEngineOn(st, url, podAdmission())
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := frontHandler(engine, src, url, log)
	if err != nil {
		return err
	}
	var limits server.ConnLimits // as serve builds it, as figure 2's
	return roleServe(limits.Server(h, nil), src, limits.Listener(ln, nil), filepath.Join(cfg.ProfileDir, "store-"+os.Getenv(envStoreKind)+".pprof"), cfg.ProfileDir != "")
}

// preload puts n completed tasks into the store, as a send leaves them: one
// message in the history, one artifact.
func preload(ctx context.Context, st tasks.Store, n int) error {
	for i := range n {
		id := a2a.TaskID(fmt.Sprintf("preload-%07d", i))
		ts := time.Now().UTC()
		msg := &a2a.Message{ID: string(id), Role: a2a.MessageRoleUser, TaskID: id, ContextID: "preload", Parts: a2a.ContentParts{a2a.TextPart{Text: "hello"}}}
		t := &a2a.Task{ID: id, ContextID: "preload", History: []*a2a.Message{msg}, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted, Timestamp: &ts}}
		if err := st.Create(ctx, t, "spiffe://bench.agentd.test/client"); err != nil {
			return err
		}
		done := *t
		done.Artifacts = []*a2a.Artifact{{ID: a2a.ArtifactID(string(id) + ".distillate"), Parts: a2a.ContentParts{a2a.TextPart{Text: "ok"}}}}
		done.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &ts}
		if err := st.Put(ctx, &done); err != nil {
			return err
		}
	}
	return nil
}

// preloaded is how many tasks figure 6 puts into a store before it measures:
// --tasks for memory, --store-tasks for the durable ones.
func preloaded(cfg Config, kind string) int {
	if kind == "memory" {
		return cfg.Tasks
	}
	return cfg.StoreTasks
}

func runStore(ctx context.Context, cfg Config, logw io.Writer) (any, error) {
	dir, err := os.MkdirTemp("", "agentd-bench-store-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := mintCerts(dir); err != nil {
		return nil, err
	}
	pg, err := pgtest.New(pgtest.Options{Durable: true})
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	dsn, err := pg.NewDatabase()
	if err != nil {
		return nil, err
	}
	procs := map[string]*roleProc{}
	clients := map[string]*http.Client{}
	for _, kind := range storeKinds {
		env := []string{envStoreKind + "=" + kind, envStoreDSN + "=" + dsn, envStoreDir + "=" + filepath.Join(dir, "state-"+kind),
			envStorePreload + "=" + strconv.Itoa(preloaded(cfg, kind))}
		start := time.Now()
		p, err := startRoleEnv(ctx, roleStoreAgentd, cfg, dir, env, logw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		defer p.stop()
		fmt.Fprintf(logw, "bench: store %s serving, %d tasks preloaded in %s\n", kind, preloaded(cfg, kind), time.Since(start).Round(time.Millisecond))
		procs[kind] = p
		if clients[kind], err = benchClient(dir, 16); err != nil {
			return nil, err
		}
	}
	for _, kind := range storeKinds {
		if _, err := load(ctx, clients[kind], procs[kind].url, 16, min(cfg.FrontDuration/4, 500*time.Millisecond)); err != nil {
			return nil, fmt.Errorf("%s warm-up: %w", kind, err)
		}
	}
	var rounds []storeRound
	for r := 0; r < cfg.Rounds; r++ {
		round := storeRound{}
		for _, conc := range []int{1, 16} {
			for i := range storeKinds {
				kind := storeKinds[(i+r)%len(storeKinds)] // rotate the order
				res, err := load(ctx, clients[kind], procs[kind].url, conc, cfg.FrontDuration)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", kind, err)
				}
				round[kind+"/"+strconv.Itoa(conc)] = res
			}
		}
		rounds = append(rounds, round)
		fmt.Fprintf(logw, "bench: store round %d: %+v\n", r+1, round)
	}
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	return rounds, nil
}

// storeGoal is figure 6's goal for a store: its req/s at least memory's over
// this factor.
var storeGoal = map[string]float64{"sqlite": 1.5, "postgres": 3}

func storeRows(raw json.RawMessage, cfg Config) ([]row, error) {
	rounds, err := decodeRounds[storeRound](raw)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, conc := range []int{1, 16} {
		key := func(kind string) string { return kind + "/" + strconv.Itoa(conc) }
		for _, kind := range storeKinds {
			get := func(r storeRound) loadResult { return r[key(kind)] }
			rr := row{fig: 6,
				what:  fmt.Sprintf("A2A message/send, mTLS keep-alive, concurrency %d: the %s store (%d tasks held before)", conc, kind, preloaded(cfg, kind)),
				p50:   fmtMS(medianOf(rounds, func(r storeRound) float64 { return get(r).Lat.P50 })),
				p99:   fmtMS(medianOf(rounds, func(r storeRound) float64 { return get(r).Lat.P99 })),
				other: fmtRPS(medianOf(rounds, func(r storeRound) float64 { return get(r).RPS }))}
			if goal, ok := storeGoal[kind]; ok {
				x := medianOf(rounds, func(r storeRound) float64 { return ratio(r[key("memory")].RPS, get(r).RPS) })
				met := "met"
				if !(x <= goal) {
					met = "missed"
				}
				rr.ratio = fmt.Sprintf("memory's req/s is %s this; goal <= %.1fx: %s", fmtX(x), goal, met)
			}
			rows = append(rows, rr)
		}
	}
	return rows, nil
}
