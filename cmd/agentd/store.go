package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
)

// storeCmdConfig is `agentd store inspect|prune`: the store of --state-dir
// (or PostgreSQL), and what to do with it.
type storeCmdConfig struct {
	Action    string // inspect or prune
	Store     storeConfig
	JSON      bool
	Task      string        // inspect: one task's snapshot
	OlderThan time.Duration // prune: finished at least this long ago
}

// operable is what the store command needs of a store.
type operable interface {
	tasks.Store
	Inspect(ctx context.Context) (store.Report, error)
	Prune(ctx context.Context, before time.Time) (store.Pruned, error)
}

const storeUsage = "Usage: agentd store inspect|prune [flags]"

func parseStoreCmd(args []string, stderr io.Writer) (*storeCmdConfig, error) {
	if len(args) == 0 || cli.IsHelp(args[0]) {
		fmt.Fprintln(stderr, storeUsage+"\n\n  inspect  what the store holds: tasks by state, unfinished ones and their runners (alive or not),\n           orphans the next start resolves, pending push notifications, stored distillates\n  prune    delete the tasks that finished at least --older-than ago, with their webhooks and\n           distillates, and every expired distillate; unfinished tasks are never touched\n\nRun \"agentd store inspect -h\" for the flags.")
		if len(args) > 0 {
			return nil, cli.ExitWith(0)
		}
		return nil, cli.UsageError("store: want inspect or prune")
	}
	c := &storeCmdConfig{Action: args[0]}
	var summary string
	switch c.Action {
	case "inspect":
		summary = "Reports what the task store holds. Opening a store migrates its schema to this agentd's."
	case "prune":
		summary = "Deletes the tasks that finished at least --older-than ago (their webhooks, pending push\nnotifications and stored distillates with them) and every expired distillate. Unfinished tasks\nare never touched. A running agentd may share the store."
	default:
		return nil, cli.UsageError("store: unknown action %q: want inspect or prune\nrun 'agentd store -h' for the actions", c.Action)
	}
	f := cli.NewFlags("store "+c.Action, stderr, summary)
	addStore(f, &c.Store, true)
	f.BoolVar(&c.JSON, "json", false, "print JSON")
	if c.Action == "inspect" {
		f.StringVar(&c.Task, "task", "", "print this task's stored snapshot (A2A JSON) instead")
	} else {
		f.DurationVar(&c.OlderThan, "older-than", 0, "prune the tasks that finished at least this long ago (required; 0s prunes every finished task)")
	}
	if err := f.Parse(args[1:]); err != nil {
		return nil, err
	}
	if f.NArg() > 0 {
		return nil, cli.UsageError("store %s takes no arguments (got %q)", c.Action, f.Args())
	}
	if c.Action == "prune" {
		given := false
		f.Visit(func(fl *flag.Flag) { given = given || fl.Name == "older-than" })
		if !given {
			return nil, cli.UsageError("store prune needs --older-than (0s prunes every finished task)")
		}
	}
	return c, nil
}

// Validate checks the settings, naming the bad one.
func (c *storeCmdConfig) Validate() error {
	if c.Store.Kind == storeMemory {
		return errors.New("--store memory: a memory store lives in its process; there is nothing to inspect or prune")
	}
	if c.OlderThan < 0 {
		return fmt.Errorf("--older-than must not be negative (got %s)", c.OlderThan)
	}
	return c.Store.Validate()
}

// runStoreCmd is `agentd store`.
func runStoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := cli.Validated(parseStoreCmd(args, stderr))
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var cl closers
	defer cl.close()
	s, err := openStore(ctx, &c.Store, storeLimits{}, "", log, &cl)
	if err != nil {
		return err
	}
	ops, ok := s.(operable)
	if !ok {
		return cli.UsageError("--store %s: cannot be inspected", c.Store.Kind)
	}
	switch c.Action {
	case "inspect":
		if c.Task != "" {
			t, owner, err := ops.Get(ctx, a2a.TaskID(c.Task))
			if err != nil {
				return err
			}
			return printJSON(stdout, map[string]any{"owner": owner, "task": t})
		}
		r, err := ops.Inspect(ctx)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(stdout, r)
		}
		printReport(stdout, r)
	case "prune":
		p, err := ops.Prune(ctx, time.Now().Add(-c.OlderThan))
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(stdout, p)
		}
		fmt.Fprintf(stdout, "pruned %d finished tasks and %d stored distillates\n", p.Tasks, p.Blobs)
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printReport(w io.Writer, r store.Report) {
	fmt.Fprintf(w, "store       %s (schema %d)\n", r.Store, r.Schema)
	fmt.Fprintf(w, "database    %s", r.Where)
	if r.Bytes > 0 {
		fmt.Fprintf(w, " (%s)", formatSize(uint64(r.Bytes)))
	}
	fmt.Fprintln(w)
	states := make([]string, 0, len(r.Tasks))
	total := 0
	for st, n := range r.Tasks {
		states = append(states, st)
		total += n
	}
	sort.Strings(states)
	fmt.Fprintf(w, "tasks       %d\n", total)
	for _, st := range states {
		fmt.Fprintf(w, "  %-14s %d\n", st, r.Tasks[st])
	}
	fmt.Fprintf(w, "unfinished  %d (orphans, resolved by the next start: %d)\n", r.Unfinished, r.Orphans)
	runners := make([]string, 0, len(r.Runners))
	for id := range r.Runners {
		runners = append(runners, id)
	}
	sort.Strings(runners)
	for _, id := range runners {
		st := r.Runners[id]
		state := "gone"
		if st.Alive {
			state = "alive"
		}
		fmt.Fprintf(w, "  runner %s  %s, %d tasks\n", id, state, st.Tasks)
	}
	fmt.Fprintf(w, "push        %d pending\n", r.Pending)
	fmt.Fprintf(w, "distillates %d (%s)\n", r.Blobs, formatSize(uint64(r.BlobBytes)))
}
