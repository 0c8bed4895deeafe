package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// benchPool is the warm pool size of the pooled variants (serve's default).
const benchPool = 2

var spawnFigure = figure{name: "spawn", run: runSpawn, rows: spawnRows}

// spawnRound is one round of figure 1.
type spawnRound struct {
	Cold      Summary `json:"cold"`       // agentd, cold re-exec
	Warm      Summary `json:"warm"`       // agentd, from the warm pool
	Floor     Summary `json:"floor"`      // bench/floor, cold exec
	FloorWarm Summary `json:"floor_warm"` // bench/floor, from the warm pool
	Misses    int     `json:"misses"`     // pooled spawns that found the pool empty
}

// stepWatch is the Observer that timestamps each node's first loop/event.
type stepWatch struct {
	mu      sync.Mutex
	waiting map[string]chan time.Time
}

func (w *stepWatch) expect(handle string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	w.waiting[handle] = ch
	w.mu.Unlock()
	return ch
}

func (w *stepWatch) NodeStarted(supervisor.NodeInfo) {}
func (w *stepWatch) NodeProgress(n supervisor.NodeInfo) {
	if n.Usage.Steps < 1 {
		return // the progress report of the spawn frame itself
	}
	at := time.Now()
	w.mu.Lock()
	ch := w.waiting[n.Handle]
	delete(w.waiting, n.Handle)
	w.mu.Unlock()
	if ch != nil {
		ch <- at
	}
}
func (w *stepWatch) NodeFinished(supervisor.NodeInfo, api.SubagentResult) {}

// spawnVariant is one supervisor of figure 1.
type spawnVariant struct {
	name  string
	sup   *supervisor.Supervisor
	watch *stepWatch
	pool  int
}

func newSpawnVariant(name, exe string, pool int, rehearse bool, log *slog.Logger) (*spawnVariant, error) {
	w := &stepWatch{waiting: make(map[string]chan time.Time)}
	s, err := supervisor.New(supervisor.Config{
		Executable: exe,
		Env:        []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")},
		Logger:     log,
		Observer:   w,
		WarmPool:   pool,
		SpawnReady: 10 * time.Second,
		// The pool's next child rehearses, as agentd's does; the floor
		// reads its first frame as the spawn.
		PoolRehearse: rehearse,
	})
	if err != nil {
		return nil, err
	}
	return &spawnVariant{name: name, sup: s, watch: w, pool: pool}, nil
}

// oneStep is a payload builtin:demo answers in one model step.
func oneStep() api.SpawnPayload {
	return api.SpawnPayload{
		Contract:     api.OutputContract{Objective: "one two three", OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Limits:       api.Limits{MaxSteps: 5, MaxTokens: 10000, Deadline: api.Duration(time.Minute), MaxChildren: 1},
		Intelligence: api.Intelligence{Endpoint: "builtin:demo"},
	}
}

// once starts one child and returns the time from Start to its first loop
// step, and whether a pooled variant found its pool empty.
func (v *spawnVariant) once(ctx context.Context) (time.Duration, bool, error) {
	if v.pool > 0 {
		// Measured against a full pool: the state a pool is in between requests.
		if err := poll(ctx, 20*time.Second, 200*time.Microsecond, v.name+": pool refill", func() bool { return v.sup.Pool().Idle == v.pool }); err != nil {
			return 0, false, err
		}
	}
	before := v.sup.Pool().Assigned
	h := uuid.NewString()
	step := v.watch.expect(h)
	t0 := time.Now()
	run, err := v.sup.Start(ctx, supervisor.StartRequest{Handle: h, Payload: oneStep()})
	if err != nil {
		return 0, false, err
	}
	var d time.Duration
	select {
	case at := <-step:
		d = at.Sub(t0)
	case <-run.Done():
		// The step and the end can be ready together (a child that answers
		// and exits at once): the step is still there.
		select {
		case at := <-step:
			d = at.Sub(t0)
		default:
			return 0, false, fmt.Errorf("%s: ended without a loop step: %+v", v.name, run.Result())
		}
	case <-time.After(30 * time.Second):
		return 0, false, fmt.Errorf("%s: no loop step within 30s", v.name)
	}
	<-run.Done()
	if res := run.Result(); res.Status != api.StatusCompleted {
		return 0, false, fmt.Errorf("%s: child ended %s: %s", v.name, res.Status, res.Detail)
	}
	miss := v.pool > 0 && v.sup.Pool().Assigned == before
	return d, miss, nil
}

func runSpawn(ctx context.Context, cfg Config, logw io.Writer) (any, error) {
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelError}))
	var vs []*spawnVariant
	for _, spec := range []struct {
		name, exe string
		pool      int
	}{
		{"cold", cfg.Agentd, 0}, {"warm", cfg.Agentd, benchPool},
		{"floor", cfg.Floor, 0}, {"floor-warm", cfg.Floor, benchPool},
	} {
		v, err := newSpawnVariant(spec.name, spec.exe, spec.pool, spec.exe == cfg.Agentd, log)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	defer func() {
		for _, v := range vs {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = v.sup.Shutdown(sctx)
			cancel()
		}
	}()
	// One unmeasured start each: the binaries' pages into the cache.
	for _, v := range vs {
		if _, _, err := v.once(ctx); err != nil {
			return nil, err
		}
	}
	var rounds []spawnRound
	for r := 0; r < cfg.Rounds; r++ {
		samples := make([][]time.Duration, len(vs))
		misses := 0
		for i := 0; i < cfg.SpawnSamples; i++ {
			// Interleaved, and each variant in every position in turn.
			for k := range vs {
				j := (k + i + r) % len(vs)
				d, miss, err := vs[j].once(ctx)
				if err != nil {
					return nil, err
				}
				samples[j] = append(samples[j], d)
				if miss {
					misses++
				}
			}
		}
		rounds = append(rounds, spawnRound{
			Cold: summarize(samples[0]), Warm: summarize(samples[1]),
			Floor: summarize(samples[2]), FloorWarm: summarize(samples[3]),
			Misses: misses,
		})
		fmt.Fprintf(logw, "bench: spawn round %d: %+v\n", r+1, rounds[r])
	}
	return rounds, nil
}

func spawnRows(raw json.RawMessage, cfg Config) ([]row, error) {
	rounds, err := decodeRounds[spawnRound](raw)
	if err != nil {
		return nil, err
	}
	med := func(f func(spawnRound) float64) float64 { return medianOf(rounds, f) }
	warm50 := med(func(r spawnRound) float64 { return r.Warm.P50 })
	goal := "goal p50 < 1 ms: met"
	if !(warm50 < 1) {
		goal = "goal p50 < 1 ms: missed"
	}
	misses := 0
	for _, r := range rounds {
		misses += r.Misses
	}
	n := rounds[0].Cold.N
	return []row{
		{fig: 1, what: "spawn to first loop step: agentd, cold re-exec",
			p50: fmtMS(med(func(r spawnRound) float64 { return r.Cold.P50 })), p99: fmtMS(med(func(r spawnRound) float64 { return r.Cold.P99 })),
			other: fmt.Sprintf("%d spawns a round", n),
			ratio: fmtX(med(func(r spawnRound) float64 { return ratio(r.Cold.P50, r.Floor.P50) })) + " the floor (p50)"},
		{fig: 1, what: fmt.Sprintf("spawn to first loop step: agentd, warm pool of %d", benchPool),
			p50: fmtMS(warm50), p99: fmtMS(med(func(r spawnRound) float64 { return r.Warm.P99 })),
			other: fmt.Sprintf("%s; %d of %d found the pool empty", goal, misses, n*len(rounds)),
			ratio: fmtX(med(func(r spawnRound) float64 { return ratio(r.Warm.P50, r.Cold.P50) })) + " cold (p50)"},
		{fig: 1, what: "floor: exec of a trivial static Go binary, same handshake",
			p50: fmtMS(med(func(r spawnRound) float64 { return r.Floor.P50 })), p99: fmtMS(med(func(r spawnRound) float64 { return r.Floor.P99 }))},
		{fig: 1, what: "floor from the warm pool (write the payload, read one frame)",
			p50: fmtMS(med(func(r spawnRound) float64 { return r.FloorWarm.P50 })), p99: fmtMS(med(func(r spawnRound) float64 { return r.FloorWarm.P99 })),
			ratio: fmtX(med(func(r spawnRound) float64 { return ratio(r.Warm.P50, r.FloorWarm.P50) })) + ": agentd warm / floor warm (p50)"},
	}, nil
}
