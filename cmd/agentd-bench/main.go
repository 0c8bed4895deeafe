// Command agentd-bench prints agentd's benchmark table (see package bench).
// `make bench` builds the binaries it measures and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentd/agentd/cmd/bench"
)

func main() {
	bench.MaybeFigure() // a figure's own process: measure, print JSON, exit
	var cfg bench.Config
	fs := flag.NewFlagSet("agentd-bench", flag.ContinueOnError)
	fs.StringVar(&cfg.Agentd, "agentd", "bin/bench/agentd", "the agentd binary")
	fs.StringVar(&cfg.Floor, "floor", "bin/bench/floor", "the bench/floor binary")
	fs.StringVar(&cfg.TreeChild, "treechild", "bin/bench/treechild", "the bench/treechild binary")
	fs.IntVar(&cfg.Rounds, "rounds", 5, "rounds per figure (each figure is their median)")
	fs.IntVar(&cfg.SpawnSamples, "spawn-samples", 100, "spawn: starts per variant per round")
	fs.DurationVar(&cfg.FrontDuration, "front-duration", 0, "front: load per server, concurrency and round (default 2s)")
	fs.IntVar(&cfg.E2ESamples, "e2e-samples", 100, "e2e: messages per variant per round")
	fs.IntVar(&cfg.TreeSize, "tree-size", 64, "teardown: processes per tree")
	fs.DurationVar(&cfg.DrainGrace, "drain-grace", 0, "teardown: ctrl/cancel to SIGTERM (default 200ms)")
	fs.DurationVar(&cfg.KillGrace, "kill-grace", 0, "teardown: SIGTERM to SIGKILL (default 200ms)")
	fs.IntVar(&cfg.LiveChildren, "live-children", 64, "memory: children alive for the RSS figure")
	fs.IntVar(&cfg.Tasks, "tasks", 100000, "memory: completed tasks put through the task store")
	fs.IntVar(&cfg.TaskCapacity, "task-capacity", 10000, "memory: the task store's capacity")
	fs.IntVar(&cfg.StoreTasks, "store-tasks", 10000, "store: completed tasks the sqlite and postgres stores hold before figure 6 measures (the memory store holds -tasks)")
	fs.IntVar(&cfg.ThroughputConc, "throughput-conc", 32, "throughput: workers sending at once")
	fs.DurationVar(&cfg.ThroughputDuration, "throughput-duration", 0, "throughput: load window per service and round (default 10s)")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", "", "front, store: write each server's CPU profile here (created)")
	liveN := fs.String("live-n", "50,100,200", "live: comma-separated numbers of subagents held in a model call at once (e.g. 50,100,200,400)")
	fs.DurationVar(&cfg.LiveSettle, "live-settle", 0, "live: how long the subagents have all been in their model calls when they are measured (default 3s: a model call lasts seconds)")
	fs.IntVar(&cfg.LivePodRuns, "live-pod-runs", bench.LivePodRuns, "live: runs sent at once to agentd serve in a 1 GiB memory cgroup (needs root; else the row says why not; -1: no pod row)")
	figures := fs.String("figures", "", "comma-separated figures to run (spawn, front, e2e, teardown, memory, store, throughput, stream, live); default all")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	for _, f := range strings.Split(*liveN, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "agentd-bench: -live-n: %q is not a positive number\n", f)
			os.Exit(2)
		}
		cfg.LiveN = append(cfg.LiveN, n)
	}
	if *figures != "" {
		cfg.Figures = strings.Split(*figures, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench.Run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
