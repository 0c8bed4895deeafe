package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/mcp"
	"github.com/agentd/agentd/supervisor/trigger"
	"github.com/agentd/agentd/supervisor/workflow"
)

// modesHelp is the part of run's and serve's help that describes the modes.
const modesHelp = `Modes (--mode):
  once      one run of --instruction; never restarted (run's default)
  loop      run again after each run ends: --interval between runs (after a failed run, the
            longer of it and the restart backoff), until --max-runs runs or a run whose
            status is in --stop-on
  schedule  run at each tick of --schedule: a cron expression ("*/15 * * * *", CRON_TZ=Zone
            first for a time zone), a descriptor (@hourly, @daily) or "@every 10m"; a tick
            that comes during a run follows --overlap (skip, queue one, cancel the running
            run); with --state-dir a tick missed while agentd was down runs once at start
  reactive  run when an MCP resource changes: --subscribe SERVER=URI (repeatable), its current
            content as a seed slice; updates within --debounce coalesce; agentd reads each
            resource right after subscribing, at start and after every reconnect, so a change
            made while it was down is not missed
  workflow  one run of the steps in --workflow FILE (JSON: named spawns with needs), run by the
            supervisor as one tree through the spawn chokepoint; never restarted
loop, schedule and reactive roots restart under the restart governor (backoff 500ms x 2^n up to
30s with jitter; a breaker opens after more than 5 failures in 60s, a crash before ctrl/ready
weighing 3). `

// modeConfig is the run mode and its settings, shared by run and serve. Every
// field's zero value is its default, so a field set without its mode is
// visible to Validate.
type modeConfig struct {
	Mode string

	Interval time.Duration // loop
	MaxRuns  int           // loop
	StopOn   []string      // loop

	Schedule string // schedule
	Overlap  string // schedule, reactive

	Subscribe []string      // reactive
	Debounce  time.Duration // reactive

	Workflow string // workflow
}

func addModes(f *cli.Flags, c *modeConfig, def string) {
	f.EnvString(&c.Mode, "mode", "AGENT_MODE", def, "run mode: once, loop, schedule, reactive or workflow (see Modes below)")
	f.EnvDuration(&c.Interval, "interval", "AGENT_INTERVAL", 0, "loop: the wait between the end of a run and the next start")
	f.EnvInt(&c.MaxRuns, "max-runs", "AGENT_MAX_RUNS", 0, "loop: stop after this many runs (0: no count)")
	f.EnvList(&c.StopOn, "stop-on", "AGENT_STOP_ON", "loop: stop after a run that ends with one of these statuses (completed, refused, exhausted_steps, exhausted_tokens, deadline, stalled, loop_detected, cancelled, crashed)")
	f.EnvString(&c.Schedule, "schedule", "AGENT_SCHEDULE", "", "schedule: a cron expression, a descriptor such as @hourly, or @every DURATION")
	f.EnvString(&c.Overlap, "overlap", "AGENT_OVERLAP", "", "schedule, reactive: what an event does while a run is under way: skip, queue (one waits; a newer one replaces it) or cancel (the running run); default skip for schedule, queue for reactive")
	f.EnvList(&c.Subscribe, "subscribe", "AGENT_SUBSCRIBE", "reactive: an MCP resource as SERVER=URI (SERVER one of --mcp)")
	f.EnvDuration(&c.Debounce, "debounce", "AGENT_DEBOUNCE", 0, "reactive: updates within this window of the first coalesce into one run with the latest content (default 250ms)")
	f.EnvString(&c.Workflow, "workflow", "AGENT_WORKFLOW", "", "workflow: the workflow file (JSON)")
}

// mode returns the parsed mode (Validate checked it); empty for serve's
// default, no mode: no run starts but those asked for over A2A.
func (c *modeConfig) mode() trigger.Mode {
	m, _ := trigger.ParseMode(c.Mode)
	return m
}

// modeName is the mode for messages.
func (c *modeConfig) modeName() string {
	if c.Mode == "" {
		return "none"
	}
	return c.Mode
}

// Validate checks the mode and its settings, naming the bad one: an unknown
// mode, a mode's setting given without its mode, a mode without its required
// setting, an invalid cron expression, a --subscribe to a server not among
// servers. It reads no file (the workflow file is read by the build).
func (c *modeConfig) Validate(servers []string) error {
	var m trigger.Mode
	if c.Mode != "" {
		var err error
		if m, err = trigger.ParseMode(c.Mode); err != nil {
			return fmt.Errorf("--mode: %v", err)
		}
	}
	given := []struct {
		flag string
		set  bool
		for_ []trigger.Mode
	}{
		{"--interval", c.Interval != 0, []trigger.Mode{trigger.ModeLoop}},
		{"--max-runs", c.MaxRuns != 0, []trigger.Mode{trigger.ModeLoop}},
		{"--stop-on", len(c.StopOn) > 0, []trigger.Mode{trigger.ModeLoop}},
		{"--schedule", c.Schedule != "", []trigger.Mode{trigger.ModeSchedule}},
		{"--overlap", c.Overlap != "", []trigger.Mode{trigger.ModeSchedule, trigger.ModeReactive}},
		{"--subscribe", len(c.Subscribe) > 0, []trigger.Mode{trigger.ModeReactive}},
		{"--debounce", c.Debounce != 0, []trigger.Mode{trigger.ModeReactive}},
		{"--workflow", c.Workflow != "", []trigger.Mode{trigger.ModeWorkflow}},
	}
	for _, g := range given {
		if !g.set {
			continue
		}
		ok := false
		for _, fm := range g.for_ {
			ok = ok || fm == m
		}
		if !ok {
			names := make([]string, len(g.for_))
			for i, fm := range g.for_ {
				names[i] = "--mode " + string(fm)
			}
			return fmt.Errorf("%s is a setting of %s, and the mode is %s", g.flag, strings.Join(names, " or "), c.modeName())
		}
	}
	switch m {
	case trigger.ModeLoop:
		if c.Interval < 0 || c.Interval > api.MaxDeadline {
			return fmt.Errorf("--interval must be in [0, %s] (got %s)", api.MaxDeadline, c.Interval)
		}
		if c.MaxRuns < 0 {
			return fmt.Errorf("--max-runs must not be negative (got %d)", c.MaxRuns)
		}
		if _, err := trigger.ParseStatuses(c.StopOn); err != nil {
			return fmt.Errorf("--stop-on: %v", err)
		}
	case trigger.ModeSchedule:
		if c.Schedule == "" {
			return errors.New("--mode schedule needs --schedule")
		}
		if _, err := trigger.ParseSchedule(c.Schedule); err != nil {
			return fmt.Errorf("--schedule %q: %v", c.Schedule, err)
		}
	case trigger.ModeReactive:
		if len(c.Subscribe) == 0 {
			return errors.New("--mode reactive needs --subscribe SERVER=URI")
		}
		known := map[string]bool{}
		for _, s := range servers {
			known[s] = true
		}
		seen := map[trigger.Subscription]bool{}
		for _, s := range c.Subscribe {
			sub, err := trigger.ParseSubscription(s)
			if err != nil {
				return fmt.Errorf("--subscribe: %v", err)
			}
			if !known[sub.Server] {
				return fmt.Errorf("--subscribe %s: no MCP server %q is configured (--mcp %s=URL)", s, sub.Server, sub.Server)
			}
			if seen[sub] {
				return fmt.Errorf("--subscribe %s: given twice", s)
			}
			seen[sub] = true
		}
		if c.Debounce < 0 || c.Debounce > time.Hour {
			return fmt.Errorf("--debounce must be in [0, 1h] (got %s)", c.Debounce)
		}
	case trigger.ModeWorkflow:
		if c.Workflow == "" {
			return errors.New("--mode workflow needs --workflow FILE")
		}
	}
	if c.Overlap != "" {
		if _, err := trigger.ParseOverlap(c.Overlap); err != nil {
			return fmt.Errorf("--overlap: %v", err)
		}
	}
	return nil
}

// mcpServerNames returns the names of the --mcp servers (entries Validate of
// the MCP settings checks).
func mcpServerNames(m *mcpConfig) []string {
	var out []string
	for _, v := range m.Servers {
		if name, _, ok := strings.Cut(v, "="); ok {
			out = append(out, name)
		}
	}
	return out
}

// loadWorkflow reads and checks the --workflow file: the build's step. A
// file that cannot be read or is not a valid workflow is bad config (exit 2),
// and so is one with more steps than the root may have children.
func loadWorkflow(path string, caps supervisor.Caps) ([]supervisor.WorkflowStep, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, cli.UsageError("--workflow: %v", err)
	}
	steps, err := workflow.Parse(b)
	if err != nil {
		return nil, cli.UsageError("--workflow %s: %v", path, err)
	}
	if n := caps.MaxChildren; n > 0 && len(steps) > n {
		return nil, cli.UsageError("--workflow %s: %d steps, more than --max-children %d (every step is a child of the workflow's root)", path, len(steps), n)
	}
	return steps, nil
}

// triggerFor builds the standing trigger of a loop, schedule or reactive
// mode; tools holds the MCP servers a reactive trigger subscribes through,
// maxContent caps a resource's content in a seed, a schedule keeps its last
// tick in stateDir (none when ""). The function it returns
// runs the trigger until ctx ends or its stop rule (loop) or breaker (with
// o.StopOnBreaker) ends it; a loop returns its last run's result.
func (c *modeConfig) triggerFor(o trigger.Options, tools *toolServers, maxContent int, stateDir string) func(ctx context.Context) (api.SubagentResult, error) {
	switch c.mode() {
	case trigger.ModeLoop:
		stop, _ := trigger.ParseStatuses(c.StopOn) // checked by Validate
		l := &trigger.Loop{Options: o, Interval: c.Interval, MaxRuns: c.MaxRuns, StopOn: stop}
		return l.Run
	case trigger.ModeSchedule:
		overlap, _ := trigger.ParseOverlap(c.Overlap)
		s := &trigger.Schedule{Options: o, Spec: c.Schedule, Overlap: overlap}
		if stateDir != "" {
			s.StateFile = filepath.Join(stateDir, "schedule.json")
		}
		return func(ctx context.Context) (api.SubagentResult, error) { return api.SubagentResult{}, s.Run(ctx) }
	case trigger.ModeReactive:
		overlap, _ := trigger.ParseOverlap(c.Overlap)
		var subs []trigger.Subscription
		for _, s := range c.Subscribe {
			sub, _ := trigger.ParseSubscription(s)
			subs = append(subs, sub)
		}
		rt := &trigger.Reactive{Options: o, Subs: subs, Subscribe: tools.subscriber(maxContent), Debounce: c.Debounce, Overlap: overlap}
		return func(ctx context.Context) (api.SubagentResult, error) { return api.SubagentResult{}, rt.Run(ctx) }
	}
	return nil
}

// subscriber adapts the MCP servers' Subscribe to the reactive trigger.
func (t *toolServers) subscriber(maxContent int) trigger.Subscriber {
	return func(sub trigger.Subscription, fn func(trigger.Update)) (func(), error) {
		if t == nil || t.set == nil {
			return nil, fmt.Errorf("no MCP server %q", sub.Server)
		}
		srv, ok := t.set.Server(sub.Server)
		if !ok {
			return nil, fmt.Errorf("no MCP server %q", sub.Server)
		}
		return srv.Subscribe(sub.URI, func(u mcp.ResourceUpdate) {
			fn(trigger.Update{Reason: u.Reason, Text: u.Text(maxContent), Err: u.Err})
		})
	}
}
