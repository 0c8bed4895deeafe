package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

var e2eFigure = figure{name: "e2e", run: runE2E, rows: e2eRows}

// e2eRound is one round of figure 3.
type e2eRound struct {
	Warm    Summary `json:"warm"`     // agentd serve --warm-pool 2 (the default store, SQLite)
	WarmMem Summary `json:"warm_mem"` // agentd serve --warm-pool 2 --store memory
	Cold    Summary `json:"cold"`     // agentd serve --warm-pool 0
}

func runE2E(ctx context.Context, cfg Config, logw io.Writer) (any, error) {
	dir, err := certsDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	type variant struct {
		srv  *serveProc
		pool int
		c    *http.Client
		op   *http.Client
	}
	var vs []*variant
	for _, v := range []struct {
		pool  int
		extra []string
	}{{benchPool, nil}, {benchPool, []string{"--store", "memory"}}, {0, nil}} {
		pool := v.pool
		args := append(append(append(tlsArgs(dir), operatorArgs()...), "--warm-pool", fmt.Sprint(pool), "--intelligence", "builtin:demo"), v.extra...)
		srv, err := startServe(ctx, cfg.Agentd, args, logw)
		if err != nil {
			return nil, err
		}
		defer srv.stop()
		c, err := benchClient(dir, 1)
		if err != nil {
			return nil, err
		}
		op, err := operatorClient(dir)
		if err != nil {
			return nil, err
		}
		vs = append(vs, &variant{srv: srv, pool: pool, c: c, op: op})
	}
	var seq int64
	// settled reports whether v's service is at rest: no child left from its
	// previous message, and a full pool (every child ready for its payload,
	// as a2a.Tree says: a child that is still starting is no warm child).
	settled := func(v *variant) (bool, error) {
		if v.srv.children() != v.pool {
			return false, nil
		}
		return poolReady(ctx, v.op, v.srv.url, v.pool)
	}
	// once sends one message to v once every service of the figure is at
	// rest: the variants are measured interleaved, and one's refill (a cold
	// start, several milliseconds of CPU) or exiting child would otherwise
	// land on the next variant's message, which is the harness measuring
	// itself, not the service.
	once := func(v *variant) (time.Duration, error) {
		var perr error
		if err := poll(ctx, 20*time.Second, time.Millisecond, "services settled", func() bool {
			for _, w := range vs {
				ok, err := settled(w)
				if err != nil {
					perr = err
					return true
				}
				if !ok {
					return false
				}
			}
			return true
		}); err != nil {
			return 0, err
		}
		if perr != nil {
			return 0, perr
		}
		seq++
		t0 := time.Now()
		if err := sendOnce(ctx, v.c, v.srv.url, sendBody(seq, 0, "one two three")); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	for _, v := range vs { // warm up: connection, TLS, the binary's pages
		if _, err := once(v); err != nil {
			return nil, err
		}
	}
	var rounds []e2eRound
	for r := 0; r < cfg.Rounds; r++ {
		samples := make([][]time.Duration, len(vs))
		for i := 0; i < cfg.E2ESamples; i++ {
			for k := range vs {
				j := (k + i + r) % len(vs)
				d, err := once(vs[j])
				if err != nil {
					return nil, err
				}
				samples[j] = append(samples[j], d)
			}
		}
		rounds = append(rounds, e2eRound{Warm: summarize(samples[0]), WarmMem: summarize(samples[1]), Cold: summarize(samples[2])})
		fmt.Fprintf(logw, "bench: e2e round %d: %+v\n", r+1, rounds[r])
	}
	return rounds, nil
}

func e2eRows(raw json.RawMessage, cfg Config) ([]row, error) {
	rounds, err := decodeRounds[e2eRound](raw)
	if err != nil {
		return nil, err
	}
	n := rounds[0].Warm.N
	return []row{
		{fig: 3, what: fmt.Sprintf("end to end: message/send to completed, builtin:demo one step, mTLS, warm pool of %d", benchPool),
			p50: fmtMS(medianOf(rounds, func(r e2eRound) float64 { return r.Warm.P50 })), p99: fmtMS(medianOf(rounds, func(r e2eRound) float64 { return r.Warm.P99 })),
			other: fmt.Sprintf("%d messages a round, each to a full pool", n),
			ratio: fmtX(medianOf(rounds, func(r e2eRound) float64 { return ratio(r.Warm.P50, r.Cold.P50) })) + " without the pool (p50)"},
		{fig: 3, what: "end to end: the same with --store memory",
			p50: fmtMS(medianOf(rounds, func(r e2eRound) float64 { return r.WarmMem.P50 })), p99: fmtMS(medianOf(rounds, func(r e2eRound) float64 { return r.WarmMem.P99 })),
			ratio: fmtX(medianOf(rounds, func(r e2eRound) float64 { return ratio(r.Warm.P50, r.WarmMem.P50) })) + ": the default store's p50 over this"},
		{fig: 3, what: "end to end: the same without the pool (--warm-pool 0)",
			p50: fmtMS(medianOf(rounds, func(r e2eRound) float64 { return r.Cold.P50 })), p99: fmtMS(medianOf(rounds, func(r e2eRound) float64 { return r.Cold.P99 }))},
	}, nil
}
