package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var throughputFigure = figure{name: "throughput", run: runThroughput, rows: throughputRows}

// The sustained load of figure 7: ThroughputConc workers, each sending
// blocking message/send of a one-step task back to back for
// ThroughputDuration. Admission is sized so that it never sheds nor queues
// at this concurrency (a run slot for every worker, room for every root
// process): the figure measures the service's cost per task, not its
// admission policy, and any answer that is not a completed task (a 429 shed
// included) counts as an error.
func throughputArgs(conc int) []string {
	return []string{
		"--warm-pool", fmt.Sprint(benchPool), "--intelligence", "builtin:demo",
		"--max-live-runs", fmt.Sprint(conc), "--max-live-subagents", fmt.Sprint(2 * conc),
		"--queue-capacity", fmt.Sprint(2 * conc),
	}
}

// throughputResult is one window of load against one service.
type throughputResult struct {
	Tasks   int     `json:"tasks"`   // completed tasks
	Errors  int     `json:"errors"`  // answers that were not a completed task, and failed requests
	Seconds float64 `json:"seconds"` // from the first send to the last answer
	TPS     float64 `json:"tps"`     // completed tasks a second
	Lat     Summary `json:"lat"`     // send to completed, of the completed tasks
	// CPU per task, in ms: the service's own (utime+stime) and its
	// children's (the reaped children's utime+stime, warm-pool refills
	// included), over the window.
	SelfCPU  float64 `json:"self_cpu_ms"`
	ChildCPU float64 `json:"child_cpu_ms"`
	FirstErr string  `json:"first_err,omitempty"`
}

// throughputRound is one round of figure 7: the default store (SQLite) and
// the memory store, interleaved.
type throughputRound struct {
	SQLite throughputResult `json:"sqlite"`
	Memory throughputResult `json:"memory"`
}

func runThroughput(ctx context.Context, cfg Config, logw io.Writer) (any, error) {
	dir, err := certsDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	type variant struct {
		srv *serveProc
		c   *http.Client
		op  *http.Client
	}
	var vs []*variant
	for _, extra := range [][]string{nil, {"--store", "memory"}} {
		args := append(append(append(tlsArgs(dir), operatorArgs()...), throughputArgs(cfg.ThroughputConc)...), extra...)
		srv, err := startServe(ctx, cfg.Agentd, args, logw)
		if err != nil {
			return nil, err
		}
		defer srv.stop()
		c, err := benchClient(dir, cfg.ThroughputConc)
		if err != nil {
			return nil, err
		}
		defer c.CloseIdleConnections()
		op, err := operatorClient(dir)
		if err != nil {
			return nil, err
		}
		vs = append(vs, &variant{srv: srv, c: c, op: op})
	}
	var seq atomic.Int64   // message ids, unique across windows: a repeated one would return its old task
	for _, v := range vs { // warm up: connections, TLS, the binary's pages
		if _, err := sustain(ctx, v.c, v.srv, cfg.ThroughputConc, min(cfg.ThroughputDuration/4, time.Second), &seq); err != nil {
			return nil, err
		}
	}
	var rounds []throughputRound
	for r := 0; r < cfg.Rounds; r++ {
		var res [2]throughputResult
		for k := range vs {
			j := (k + r) % len(vs)
			// Each window starts from a settled service: a full pool, no
			// child of the window before.
			var perr error
			if err := poll(ctx, 30*time.Second, time.Millisecond, "service settled", func() bool {
				if vs[j].srv.children() != benchPool {
					return false
				}
				ok, err := poolReady(ctx, vs[j].op, vs[j].srv.url, benchPool)
				perr = err
				return ok || err != nil
			}); err != nil {
				return nil, err
			}
			if perr != nil {
				return nil, perr
			}
			if res[j], err = sustain(ctx, vs[j].c, vs[j].srv, cfg.ThroughputConc, cfg.ThroughputDuration, &seq); err != nil {
				return nil, err
			}
		}
		rounds = append(rounds, throughputRound{SQLite: res[0], Memory: res[1]})
		fmt.Fprintf(logw, "bench: throughput round %d: %+v\n", r+1, rounds[r])
	}
	return rounds, nil
}

// sustain runs conc workers sending one-step tasks to srv back to back for
// d, and measures what the service did and spent meanwhile.
func sustain(ctx context.Context, c *http.Client, srv *serveProc, conc int, d time.Duration, seq *atomic.Int64) (throughputResult, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		lats []time.Duration
		res  throughputResult
	)
	cpu0, err := cpuTimes(srv.pid())
	if err != nil {
		return res, err
	}
	start := time.Now()
	end := start.Add(d)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var mine []time.Duration
			var errs int
			var first string
			for time.Now().Before(end) && ctx.Err() == nil {
				body := sendBody(seq.Add(1), w, "one two three")
				t0 := time.Now()
				if err := sendOnce(ctx, c, srv.url, body); err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, mine...)
			res.Errors += errs
			if res.FirstErr == "" {
				res.FirstErr = first
			}
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := cpuTimes(srv.pid())
	if err != nil {
		return res, err
	}
	res.Tasks, res.Seconds, res.Lat = len(lats), elapsed.Seconds(), summarize(lats)
	res.TPS = float64(res.Tasks) / elapsed.Seconds()
	if n := float64(res.Tasks + res.Errors); n > 0 {
		res.SelfCPU = (cpu1.self - cpu0.self) / n
		res.ChildCPU = (cpu1.children - cpu0.children) / n
	}
	return res, ctx.Err()
}

// cpu is a process's CPU time in ms: its own and its reaped children's.
type cpu struct{ self, children float64 }

// cpuTimes reads utime, stime, cutime and cstime of /proc/pid/stat.
func cpuTimes(pid int) (cpu, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpu{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return cpu{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// After the name: state is field 0, utime 11, stime 12, cutime 13, cstime 14.
	if len(f) < 15 {
		return cpu{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var t [4]float64
	for k := range t {
		v, err := strconv.ParseFloat(f[11+k], 64)
		if err != nil {
			return cpu{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		t[k] = v * 1000 / clockTicks
	}
	return cpu{self: t[0] + t[1], children: t[2] + t[3]}, nil
}

// clockTicks is USER_HZ, the unit of /proc/pid/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

func throughputRows(raw json.RawMessage, cfg Config) ([]row, error) {
	rounds, err := decodeRounds[throughputRound](raw)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, v := range []struct {
		what string
		get  func(throughputRound) throughputResult
	}{
		{fmt.Sprintf("sustained: blocking one-step tasks (builtin:demo), concurrency %d for %s, mTLS, warm pool of %d", cfg.ThroughputConc, cfg.ThroughputDuration, benchPool),
			func(r throughputRound) throughputResult { return r.SQLite }},
		{"sustained: the same with --store memory", func(r throughputRound) throughputResult { return r.Memory }},
	} {
		errs := 0
		first := ""
		for _, r := range rounds {
			errs += v.get(r).Errors
			if first == "" {
				first = v.get(r).FirstErr
			}
		}
		other := fmt.Sprintf("%.0f tasks/s; %d errors; CPU per task: service %.2f ms, children %.2f ms",
			medianOf(rounds, func(r throughputRound) float64 { return v.get(r).TPS }), errs,
			medianOf(rounds, func(r throughputRound) float64 { return v.get(r).SelfCPU }),
			medianOf(rounds, func(r throughputRound) float64 { return v.get(r).ChildCPU }))
		if first != "" {
			other += fmt.Sprintf(" (first: %.120s)", first)
		}
		rows = append(rows, row{fig: 7, what: v.what,
			p50:   fmtMS(medianOf(rounds, func(r throughputRound) float64 { return v.get(r).Lat.P50 })),
			p99:   fmtMS(medianOf(rounds, func(r throughputRound) float64 { return v.get(r).Lat.P99 })),
			other: other})
	}
	rows[0].ratio = fmtX(medianOf(rounds, func(r throughputRound) float64 { return ratio(r.SQLite.TPS, r.Memory.TPS) })) + " the memory store's tasks/s"
	return rows, nil
}
