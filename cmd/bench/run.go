// Package bench is agentd's benchmark harness: the program behind `make bench`
// (cmd/agentd-bench) prints one table of the figures docs/performance.md quotes.
//
// Every figure is measured in a process of its own (the harness re-executes
// itself with EnvFigure set), so one figure's heap, goroutines and children
// never weigh on another's, and so the figures that host a
// supervisor.Supervisor (spawn, teardown) never share a process with os/exec
// (the supervisor's reaper owns wait4). Every figure is the median over
// Config.Rounds rounds, and every comparison is a ratio taken inside each round
// between variants measured interleaved (A, B, B, A, ...), then the median of
// those ratios.
//
// The figures:
//  1. spawn: Supervisor.Start to the first loop/event of a one-step child:
//     agentd re-exec'd cold, agentd from the warm pool, and the floor (the exec
//     of bench/floor, a trivial static Go binary doing the same handshake),
//     cold and from the pool.
//  2. front: message/send over mTLS keep-alive (HTTP/1.1) at concurrency 1 and
//     16: agentd's whole front (authentication, router, task store, engine,
//     executor) completing through an in-process provider that answers at
//     once, against a stock a2a-go v0.3.3 server (a2asrv.NewHandler and
//     NewJSONRPCHandler) whose trivial executor produces the same task. Each
//     server runs in its own process; the load generator in a third.
//  3. e2e: message/send to `agentd serve` running builtin:demo (one step) until
//     completed, with --warm-pool 2 (the default store, then --store memory)
//     and with --warm-pool 0, over mTLS.
//  4. teardown: Supervisor.Cancel of a tree of TreeSize processes until every
//     one is reaped: agentd children (cooperative), and bench/treechild
//     children that ignore ctrl/cancel and SIGTERM.
//  5. memory: `agentd serve` RSS idle and with LiveChildren children running
//     builtin:wait, RSS and PSS per child, and the heap of the task store after
//     Tasks completed tasks (bounded by TaskCapacity).
//  6. store: message/send through agentd's front on the memory store
//     (holding Tasks), SQLite and PostgreSQL (each holding StoreTasks), side
//     by side.
//  7. throughput: ThroughputConc workers sending blocking one-step tasks to
//     `agentd serve` (warm pool of 2, admission sized not to shed) back to
//     back for ThroughputDuration: tasks/s, p50 and p99, errors, and the CPU
//     per task of the service and of its children; the default store
//     (SQLite) and --store memory, interleaved.
//  8. stream: the time from a local streaming model server's first token
//     (its flush) to the A2A client's first artifact-update event of a
//     message/stream over mTLS keep-alive: the root's own model streaming,
//     and its child's (one level down), interleaved.
//  9. live: LiveN subagents at once, each blocked in a model call to a local
//     slow model server with a 64 KiB conversation and a 16 KiB tool result
//     (live.go): the supervisor's RSS and Go heap, the children's PSS and
//     private memory, summed and per child, flat and in trees of a root and
//     8 children; beside it the floor waiting on its pipe and an idle
//     warm-pool child; and the pod: how many of them one service holds in a
//     real 1 GiB memory cgroup, as deployed (livepod.go).
package bench

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// EnvFigure names the figure (or helper role) a harness process runs; Run sets
// it on the processes it starts, and MaybeFigure obeys it.
const EnvFigure = "AGENTD_BENCH_FIGURE"

// envConfig carries the Config to a figure process, as JSON.
const envConfig = "AGENTD_BENCH_CONFIG"

// Config is what the harness runs with. Zero fields take their defaults.
type Config struct {
	Agentd    string `json:"agentd"`    // the agentd binary (make bench builds it as deployed: static, stripped)
	Floor     string `json:"floor"`     // the bench/floor binary
	TreeChild string `json:"treechild"` // the bench/treechild binary

	Rounds int `json:"rounds"` // every figure is the median over this many rounds; default 5

	SpawnSamples  int           `json:"spawn_samples"`  // spawn: starts per variant per round; default 100
	FrontDuration time.Duration `json:"front_duration"` // front: load per server, concurrency and round; default 2s
	E2ESamples    int           `json:"e2e_samples"`    // e2e: messages per variant per round; default 100
	TreeSize      int           `json:"tree_size"`      // teardown: processes per tree, the root included; default 64
	DrainGrace    time.Duration `json:"drain_grace"`    // teardown: ctrl/cancel to SIGTERM; default 200ms
	KillGrace     time.Duration `json:"kill_grace"`     // teardown: SIGTERM to SIGKILL; default 200ms
	LiveChildren  int           `json:"live_children"`  // memory: children alive for the RSS figure; default 64
	Tasks         int           `json:"tasks"`          // memory: completed tasks put through the store; default 100000
	TaskCapacity  int           `json:"task_capacity"`  // memory: the store's capacity; default 10000 (serve's default)
	StoreTasks    int           `json:"store_tasks"`    // store: completed tasks the durable stores hold before figure 6 measures (memory holds Tasks); default 10000
	LiveN         []int         `json:"live_n"`         // live: the numbers of subagents held in a model call; default 50, 100, 200
	LivePodRuns   int           `json:"live_pod_runs"`  // live: runs sent at once to the service in a 1 GiB memory cgroup; default LivePodRuns
	LiveSettle    time.Duration `json:"live_settle"`    // live: how long the subagents have all been in their model calls when they are measured; default 3s

	ThroughputConc     int           `json:"throughput_conc"`     // throughput: workers sending at once; default 32
	ThroughputDuration time.Duration `json:"throughput_duration"` // throughput: the load window per service and round; default 10s

	// Figures selects figures by name (spawn, front, e2e, teardown, memory,
	// store, throughput, stream, live); empty runs them all.
	Figures []string `json:"figures"`
	// ProfileDir, if set, receives a CPU profile of each server of
	// figures 2 and 6 (front-agentd.pprof, front-stock.pprof,
	// store-KIND.pprof); Run creates it.
	ProfileDir string `json:"profile_dir"`
}

func (c *Config) setDefaults() {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	defD := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&c.Rounds, 5)
	def(&c.SpawnSamples, 100)
	defD(&c.FrontDuration, 2*time.Second)
	def(&c.E2ESamples, 100)
	def(&c.TreeSize, 64)
	defD(&c.DrainGrace, 200*time.Millisecond)
	defD(&c.KillGrace, 200*time.Millisecond)
	def(&c.LiveChildren, 64)
	def(&c.Tasks, 100000)
	def(&c.TaskCapacity, 10000)
	def(&c.ThroughputConc, 32)
	defD(&c.ThroughputDuration, 10*time.Second)
	def(&c.StoreTasks, 10000)
	defD(&c.LiveSettle, 3*time.Second)
	if c.LivePodRuns == 0 {
		c.LivePodRuns = LivePodRuns
	}
	if len(c.LiveN) == 0 {
		c.LiveN = []int{50, 100, 200}
	}
}

// figure is one section of the table.
type figure struct {
	name string
	// run measures, in the figure's own process, and returns its result.
	run func(ctx context.Context, cfg Config, log io.Writer) (any, error)
	// rows formats a result decoded from JSON.
	rows func(raw json.RawMessage, cfg Config) ([]row, error)
}

// figures in table order.
var figures = []figure{spawnFigure, frontFigure, e2eFigure, teardownFigure, memoryFigure, storeFigure, throughputFigure, streamFigure, liveFigure}

// roles are helper processes a figure starts (the front's servers).
var roles = map[string]func(ctx context.Context, cfg Config) error{
	roleFrontAgentd: serveFrontAgentd,
	roleFrontStock:  serveFrontStock,
	roleStoreAgentd: serveStoreAgentd,
}

// MaybeFigure runs the figure or role named in EnvFigure and exits, when this
// process was started for one; otherwise it returns at once. The harness's
// main (and a test binary's TestMain) calls it first.
func MaybeFigure() {
	name := os.Getenv(EnvFigure)
	if name == "" {
		return
	}
	var cfg Config
	if err := json.Unmarshal([]byte(os.Getenv(envConfig)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench: bad config:", err)
		os.Exit(2)
	}
	cfg.setDefaults()
	ctx := context.Background()
	if role, ok := roles[name]; ok {
		if err := role(ctx, cfg); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", name, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	for _, f := range figures {
		if f.name != name {
			continue
		}
		res, err := f.run(ctx, cfg, os.Stderr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", name, err)
			os.Exit(1)
		}
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "bench: no figure %q\n", name)
	os.Exit(2)
}

// figureCmd returns a command that runs this executable as figure or role
// name with cfg.
func figureCmd(ctx context.Context, name string, cfg Config) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), EnvFigure+"="+name, envConfig+"="+string(b))
	return cmd, nil
}

// Run measures the selected figures, each in its own process, and writes the
// table to out; progress and the figures' logs go to logw.
func Run(ctx context.Context, cfg Config, out, logw io.Writer) error {
	cfg.setDefaults()
	for _, p := range []struct{ name, path string }{{"agentd", cfg.Agentd}, {"floor", cfg.Floor}, {"treechild", cfg.TreeChild}} {
		if p.path == "" {
			return fmt.Errorf("bench: the %s binary is required", p.name)
		}
		if _, err := os.Stat(p.path); err != nil {
			return fmt.Errorf("bench: %s binary: %w", p.name, err)
		}
	}
	if cfg.ProfileDir != "" {
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return fmt.Errorf("bench: -profile-dir: %w", err)
		}
	}
	want := map[string]bool{}
	for _, n := range cfg.Figures {
		want[n] = true
	}
	for n := range want {
		known := false
		for _, f := range figures {
			known = known || f.name == n
		}
		if !known {
			return fmt.Errorf("bench: no figure %q", n)
		}
	}
	m := machine()
	m.agentd = builtWith(cfg.Agentd)
	var rows []row
	for _, f := range figures {
		if len(want) > 0 && !want[f.name] {
			continue
		}
		fmt.Fprintf(logw, "bench: %s...\n", f.name)
		start := time.Now()
		cmd, err := figureCmd(ctx, f.name, cfg)
		if err != nil {
			return err
		}
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, logw
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("bench: figure %s: %w", f.name, err)
		}
		rs, err := f.rows(stdout.Bytes(), cfg)
		if err != nil {
			return fmt.Errorf("bench: figure %s: %w", f.name, err)
		}
		rows = append(rows, rs...)
		fmt.Fprintf(logw, "bench: %s done in %s\n", f.name, time.Since(start).Round(time.Millisecond))
	}
	m.loadAfter = loadAvg()
	writeTable(out, m, cfg, rows)
	return nil
}

// row is one line of the table.
type row struct {
	fig   int
	what  string
	p50   string
	p99   string
	other string
	ratio string
}

type machineInfo struct {
	cpus       int
	model      string
	goVersion  string
	loadBefore string
	loadAfter  string
	agentd     string // how the agentd measured was built (builtWith)
}

// builtWith is the Go version that built the binary at path, with the
// experiments it set ("go1.26.8-X:nogreenteagc"): the collector it runs
// with moves figure 9 (Makefile, GOEXPERIMENT).
func builtWith(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return bi.GoVersion
}

func machine() machineInfo {
	m := machineInfo{cpus: runtime.NumCPU(), goVersion: runtime.Version(), loadBefore: loadAvg(), model: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.model = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAvg is the 1, 5 and 15 minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func writeTable(w io.Writer, m machineInfo, cfg Config, rows []row) {
	fmt.Fprintf(w, "agentd bench: %d CPUs (%s), %s (agentd: %s), load %s before and %s after; every figure the median of %d rounds\n\n",
		m.cpus, m.model, m.goVersion, m.agentd, m.loadBefore, m.loadAfter, cfg.Rounds)
	fmt.Fprintln(w, "| # | what | p50 | p99 | other | ratio (same run, interleaved) |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s |\n", r.fig, r.what, dash(r.p50), dash(r.p99), dash(r.other), dash(r.ratio))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fmtMS formats milliseconds with three significant digits.
func fmtMS(v float64) string {
	switch {
	case v != v:
		return "n/a"
	case v < 1:
		return fmt.Sprintf("%.3f ms", v)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

func fmtX(v float64) string {
	if v != v {
		return "n/a"
	}
	if v < 0.1 {
		return fmt.Sprintf("%.3fx", v)
	}
	return fmt.Sprintf("%.2fx", v)
}

func fmtMiB(bytes float64) string { return fmt.Sprintf("%.1f MiB", bytes/(1<<20)) }

// decode unmarshals a figure's JSON result.
func decode[T any](raw json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("decode result: %w", err)
	}
	return v, nil
}

// decodeRounds unmarshals a figure's rounds; a figure that produced none is
// an error (errNoRounds).
func decodeRounds[T any](raw json.RawMessage) ([]T, error) {
	rounds, err := decode[[]T](raw)
	if err == nil && len(rounds) == 0 {
		err = errNoRounds
	}
	return rounds, err
}

// certsDir makes a temporary directory and mints the bench's certificates
// into it (mintCerts); the caller removes it.
func certsDir() (string, error) {
	dir, err := os.MkdirTemp("", "agentd-bench-certs-")
	if err != nil {
		return "", err
	}
	if err := mintCerts(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// errNoRounds reports a figure that produced nothing.
var errNoRounds = errors.New("bench: the figure produced no rounds")

// poll calls cond every interval until it holds, or fails after within.
func poll(ctx context.Context, within, interval time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return nil
}
