package admit

import (
	"errors"
	"testing"
)

const gib = 1 << 30

func TestDerive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   uint64
		pool    int
		bounds  Bounds
		ceiling Bounds
		base    uint64
		reserve uint64
	}{
		{
			// The Deployment's pod (deploy/): 1 GiB, the default warm pool.
			name: "1 GiB pod, warm pool 2", limit: gib, pool: 2,
			bounds:  Bounds{MaxRuns: 152, MaxLive: 305, QueueCapacity: 608},
			ceiling: Bounds{MaxRuns: 382, MaxLive: 382, QueueCapacity: 2432},
			base:    64 * MiB, reserve: 256 * MiB,
		},
		{
			name: "1 GiB pod, no pool", limit: gib, pool: 0,
			bounds:  Bounds{MaxRuns: 153, MaxLive: 307, QueueCapacity: 612},
			ceiling: Bounds{MaxRuns: 384, MaxLive: 384, QueueCapacity: 2448},
			base:    64 * MiB, reserve: 256 * MiB,
		},
		{
			// The base's floor binds below 1 GiB, the reserve's below 384 MiB.
			name: "256 MiB", limit: 256 * MiB, pool: 2,
			bounds:  Bounds{MaxRuns: 29, MaxLive: 59, QueueCapacity: 116},
			ceiling: Bounds{MaxRuns: 74, MaxLive: 74, QueueCapacity: 464},
			base:    64 * MiB, reserve: 96 * MiB,
		},
		{
			name: "too small for one child still admits one run", limit: 64 * MiB, pool: 2,
			bounds:  Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 4},
			ceiling: Bounds{MaxRuns: 1, MaxLive: 1, QueueCapacity: 16},
			base:    64 * MiB, reserve: 96 * MiB,
		},
		{
			name: "a large machine is capped", limit: 256 * gib, pool: 2,
			bounds:  Bounds{MaxRuns: 512, MaxLive: MaxLiveCap, QueueCapacity: 2048},
			ceiling: Bounds{MaxRuns: CeilingLiveCap, MaxLive: CeilingLiveCap, QueueCapacity: 8192},
			base:    16 * gib, reserve: 64 * gib,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Derive(tc.limit, tc.pool)
			if d.Bounds != tc.bounds || d.Ceiling != tc.ceiling || d.Base != tc.base || d.Reserve != tc.reserve {
				t.Errorf("Derive = %+v\nwant bounds %+v ceiling %+v base %d MiB reserve %d MiB", d, tc.bounds, tc.ceiling, tc.base/MiB, tc.reserve/MiB)
			}
			if err := d.Validate(); err != nil {
				t.Error(err)
			}
			if err := d.Bounds.within(d.Ceiling); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	d := Derive(gib, 2) // 152 runs, 305 live, 608 queued; ceilings 382, 382, 2432
	for _, tc := range []struct {
		name              string
		runs, live, queue int
		want              Bounds
		err               string // the CeilingError's name, or "invalid"
	}{
		{name: "all derived", want: Bounds{152, 305, 608}},
		{name: "explicit", runs: 10, live: 100, queue: 5, want: Bounds{10, 100, 5}},
		{name: "a low process bound lowers the derived runs", live: 8, want: Bounds{8, 8, 608}},
		{name: "runs above the derived processes raise them", runs: 350, want: Bounds{350, 350, 608}},
		{name: "no queue", queue: -1, want: Bounds{152, 305, 0}},
		{name: "over the ceiling", live: 383, err: "max_live_subagents"},
		{name: "runs over the ceiling", runs: 383, err: "max_live_runs"},
		{name: "queue over the ceiling", queue: 2433, err: "queue_capacity"},
		{name: "runs above explicit processes", runs: 10, live: 5, err: "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := d.Resolve(tc.runs, tc.live, tc.queue)
			var ce *CeilingError
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err == "" && b != tc.want:
				t.Fatalf("Resolve = %+v, want %+v", b, tc.want)
			case tc.err == "invalid" && (err == nil || errors.As(err, &ce)):
				t.Fatalf("Resolve = %+v, %v; want a validation error", b, err)
			case tc.err != "" && tc.err != "invalid" && (!errors.As(err, &ce) || ce.Name != tc.err):
				t.Fatalf("Resolve = %+v, %v; want a ceiling error on %s", b, err, tc.err)
			}
		})
	}
}
