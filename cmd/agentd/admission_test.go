package main

import (
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/cmd/agentd/internal/cli/clitest"
	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/internal/memlimit"
)

func TestAdmissionValidate(t *testing.T) {
	parse := func() (*serveConfig, error) { return defaultServe(t), nil }
	clitest.CheckValidate(t, parse, (*serveConfig).Validate, []clitest.ValidateCase[serveConfig]{
		{"--max-live-runs", func(c *serveConfig) { c.Admission.MaxRuns = -1 }},
		{"--max-live-subagents", func(c *serveConfig) { c.Admission.MaxLive = -2 }},
		{"--queue-capacity", func(c *serveConfig) { c.Admission.QueueCapacity = -2 }},
		{"--max-live-runs", func(c *serveConfig) { c.Admission.MaxRuns, c.Admission.MaxLive = 9, 8 }},
		{"--memory-limit", func(c *serveConfig) { c.Admission.MemoryLimit = "lots" }},
		{"--priority-caps", func(c *serveConfig) { c.Admission.PriorityCaps = "peer=urgent" }},
		{"--priority-caps", func(c *serveConfig) { c.Admission.PriorityCaps = "somebody=high" }},
		{"--memory-sample-interval", func(c *serveConfig) { c.Admission.SampleInterval = time.Millisecond }},
		{"--memory-sample-interval", func(c *serveConfig) { c.Admission.SampleInterval = time.Minute }},
		{"--child-memory", func(c *serveConfig) { c.Admission.ChildMemory = "big" }},
		{"--child-memory", func(c *serveConfig) { c.Admission.ChildMemory = "1MiB" }},
	})
}

// The defaults are derived; the flags and their env vars set them.
func TestAdmissionFlags(t *testing.T) {
	c := defaultServe(t)
	if c.Admission != (admissionConfig{MemoryLimit: "0", PriorityCaps: admit.DefaultPolicy, SampleInterval: 250 * time.Millisecond, ChildMemory: "0"}) {
		t.Fatalf("defaults %+v", c.Admission)
	}
	t.Setenv("AGENT_MAX_LIVE_SUBAGENTS", "12")
	t.Setenv("AGENT_PRIORITY_CAPS", "peer=low")
	c, err := parseServe([]string{"--max-live-runs", "3", "--queue-capacity", "-1", "--memory-limit", "512MiB", "--memory-sample-interval", "1s", "--child-memory", "64MiB"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := admissionConfig{MaxRuns: 3, MaxLive: 12, QueueCapacity: -1, MemoryLimit: "512MiB", PriorityCaps: "peer=low", SampleInterval: time.Second, ChildMemory: "64MiB"}
	if c.Admission != want {
		t.Fatalf("parsed %+v, want %+v", c.Admission, want)
	}
}

// The build derives the bounds from the memory limit, lowered by
// --memory-limit, and refuses a bound above its ceiling or a memory limit
// above the one found, naming the setting (exit 2).
func TestOpenAdmission(t *testing.T) {
	t.Cleanup(func() { debug.SetMemoryLimit(math.MaxInt64) })
	found, err := memlimit.Read()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if found.Bytes < 1<<30 {
		t.Skipf("this machine's limit %s is under 1 GiB", found)
	}
	a, err := openAdmission(&admissionConfig{MemoryLimit: "1GiB", PriorityCaps: admit.DefaultPolicy}, 2, log)
	if err != nil {
		t.Fatal(err)
	}
	cur, ceiling := a.ctrl.Bounds()
	if cur != (admit.Bounds{MaxRuns: 152, MaxLive: 305, QueueCapacity: 608}) || ceiling != (admit.Bounds{MaxRuns: 382, MaxLive: 382, QueueCapacity: 2432}) {
		t.Fatalf("a 1 GiB budget: bounds %+v, ceiling %+v", cur, ceiling)
	}
	// The supervisor's Go heap is held to its share, the reserve, and the
	// memory gate to the budget.
	if os.Getenv("GOMEMLIMIT") == "" {
		if got := debug.SetMemoryLimit(-1); got != 256<<20 || a.goLimit != got {
			t.Fatalf("Go memory limit %d (recorded %d), want the reserve, 256 MiB", got, a.goLimit)
		}
	}
	if m := a.ctrl.MemoryStats(); m.Limit != 1<<30 {
		t.Fatalf("the memory gate's limit is %d, want 1 GiB", m.Limit)
	}
	a, err = openAdmission(&admissionConfig{MaxLive: 8, MaxRuns: 8, QueueCapacity: 32, MemoryLimit: "1GiB"}, 0, log)
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := a.ctrl.Bounds(); cur != (admit.Bounds{MaxRuns: 8, MaxLive: 8, QueueCapacity: 32}) {
		t.Fatalf("explicit bounds %+v", cur)
	}
	for _, tc := range []struct {
		c    admissionConfig
		want string
	}{
		{admissionConfig{MaxLive: 383, MemoryLimit: "1GiB"}, "--max-live-subagents 383 is above its ceiling of 382"},
		{admissionConfig{MaxRuns: 383, MemoryLimit: "1GiB"}, "--max-live-runs 383 is above its ceiling of 382"},
		{admissionConfig{QueueCapacity: 2433, MemoryLimit: "1GiB"}, "--queue-capacity 2433 is above its ceiling of 2432"},
		{admissionConfig{MemoryLimit: formatSize(found.Bytes + 1<<30)}, "--memory-limit"},
	} {
		_, err := openAdmission(&tc.c, 2, log)
		var ee *cli.ExitError
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ee) || ee.Code != api.ExitUsage {
			t.Errorf("%+v: %v, want exit 2 naming %q", tc.c, err, tc.want)
		}
	}
}
