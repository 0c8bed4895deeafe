package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/internal/testkit"
)

// The test binary is also the harness's figure process: Run re-executes it
// with EnvFigure set.
func TestMain(m *testing.M) {
	MaybeFigure()
	os.Exit(testkit.LeakCheck(m.Run()))
}

// buildBinaries builds agentd, the floor and treechild into a temporary
// folder.
func buildBinaries(t *testing.T) (agentd, floor, treechild string) {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []struct{ out, pkg string }{
		{"agentd", "../agentd"}, {"floor", "./floor"}, {"treechild", "./treechild"},
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return filepath.Join(dir, "agentd"), filepath.Join(dir, "floor"), filepath.Join(dir, "treechild")
}

// A smoke run of every figure with tiny counts, so the harness cannot rot:
// each figure's process runs, the table has every row with numbers, and no
// process is left behind (the test is the subreaper of everything the
// harness starts, so an orphan would become its child).
func TestHarnessSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs agentd")
	}
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	agentd, floor, treechild := buildBinaries(t)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	cfg := Config{
		Agentd: agentd, Floor: floor, TreeChild: treechild,
		Rounds: 1, SpawnSamples: 2, FrontDuration: 100 * time.Millisecond, E2ESamples: 2,
		TreeSize: 4, DrainGrace: 50 * time.Millisecond, KillGrace: 50 * time.Millisecond,
		LiveChildren: 2, Tasks: 300, TaskCapacity: 100, StoreTasks: 50,
		ThroughputConc: 4, ThroughputDuration: 300 * time.Millisecond,
		LiveN: []int{9}, LivePodRuns: 12, LiveSettle: time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, logs bytes.Buffer
	if err := Run(ctx, cfg, &out, &logs); err != nil {
		t.Fatalf("run: %v\nlog:\n%s", err, logs.String())
	}
	// Every figure process was waited for; anything still our child (alive
	// or a zombie) was orphaned by one of them.
	if left := testkit.Children(os.Getpid()); len(left) > 0 {
		for _, pid := range left {
			_ = unix.Kill(pid, unix.SIGKILL)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(pid, &ws, 0, nil)
		}
		t.Fatalf("processes left behind by the harness: %v", left)
	}
	table := out.String()
	t.Logf("table:\n%s", table)
	want := map[string]int{"| 1 |": 4, "| 2 |": 8, "| 3 |": 3, "| 4 |": 2, "| 5 |": 4, "| 6 |": 6, "| 7 |": 2, "| 8 |": 2, "| 9 |": 10}
	for prefix, n := range want {
		if got := strings.Count(table, "\n"+prefix); got != n {
			t.Errorf("%d rows of figure %s, want %d", got, prefix, n)
		}
	}
	for _, bad := range []string{"n/a", "NaN"} {
		if strings.Contains(table, bad) {
			t.Errorf("table has %s:\n%s", bad, table)
		}
	}
	for _, s := range []string{"100 tasks held", "drain grace 50ms + kill grace 50ms", "CPUs (", "(agentd: go1", "; 0 errors; CPU per task", "9 subagents in a model call (trees of a root and 8 children", "(anonymous: +", " KiB), ", "the warm pool's next child in line, after its rehearsal"} {
		if !strings.Contains(table, s) {
			t.Errorf("table lacks %q", s)
		}
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), Config{}, &out, &out); err == nil || !strings.Contains(err.Error(), "agentd binary is required") {
		t.Errorf("no binaries: %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), Config{Agentd: self, Floor: self, TreeChild: self, Figures: []string{"nope"}}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), `no figure "nope"`) {
		t.Errorf("unknown figure: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("a refused run printed %q", out.String())
	}
}

func TestStats(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if s := summarize(ds); s.N != 100 || s.P50 != 50 || s.P99 != 99 {
		t.Errorf("summarize 1..100 ms = %+v, want p50 50, p99 99", s)
	}
	if s := summarize(ds[:1]); s.P50 != 100 || s.P99 != 100 {
		t.Errorf("summarize one sample = %+v", s)
	}
	if s := summarize(nil); s != (Summary{}) {
		t.Errorf("summarize nothing = %+v", s)
	}
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if !math.IsNaN(median(nil)) || !math.IsNaN(ratio(1, 0)) {
		t.Error("median of nothing and ratio over zero must be NaN")
	}
	for _, tc := range []struct {
		v    float64
		want string
	}{{0.4567, "0.457 ms"}, {4.567, "4.57 ms"}, {45.67, "45.7 ms"}, {456.7, "457 ms"}, {math.NaN(), "n/a"}} {
		if got := fmtMS(tc.v); got != tc.want {
			t.Errorf("fmtMS(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	if got := fmt.Sprint(fmtX(3.5), " ", fmtX(0.05)); got != "3.50x 0.050x" {
		t.Errorf("fmtX = %q", got)
	}
}

// The supervisor's rows: over idle at each N (no goal), the slope between
// two Ns, and the line fitted over them all, whose slope the goal is held
// to; the pool's next child in line beside the idle child's goal.
func TestLiveRowsSlope(t *testing.T) {
	const mib = 1 << 20
	m := func(procs int, rss, anon float64) liveMeasure {
		return liveMeasure{Procs: procs, SupRSS: rss * mib, SupIdleRSS: 20 * mib, SupAnon: anon * mib, SupIdleAnon: 4 * mib, SumPSS: float64(procs) * 3 * mib, SumPriv: float64(procs) * 3 * mib,
			SupAfterRSS: 30 * mib, SupAfterAnon: 10 * mib}
	}
	round := liveRound{Flat: map[int]liveMeasure{50: m(50, 40, 20), 400: m(400, 60, 40)}, Tree: map[int]liveMeasure{}, FloorPriv: 2 * mib, FloorPSS: 2 * mib, IdlePriv: 2100 << 10, IdlePSS: 4 * mib,
		HeadPriv: 2200 << 10, HeadAnon: 2136 << 10}
	raw, err := json.Marshal([]liveRound{round})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := liveRows(raw, Config{LiveN: []int{50, 400}})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&text, "%s | %s | %s\n", r.what, r.other, r.ratio)
	}
	for _, want := range []string{
		"from 50 to 400 subagents: the supervisor per added child | RSS +20.0 MiB, anonymous +20.0 MiB over 350 children | +59 KiB RSS per added child (anonymous +59 KiB); goal <= 64 KiB: met",
		"+410 KiB RSS per child over idle (anonymous: +328 KiB; 20.0 MiB, idle 4.0 MiB): the one-time growth counted in; no goal (the fitted row)",
		"2.1 MiB private (2100 KiB), 4.0 MiB PSS; goal <= 2 MiB: missed",
		"2.1 MiB private (2200 KiB), 2136 KiB anonymous; +100 KiB over the idle child: what its rehearsal builds for the run it is next to take, no goal",
		// 40 MiB at 50 and 60 at 400: 20 MiB over 350 children, 58.5 KiB a
		// child, and 37.1 MiB at none, 17.1 over the idle 20 MiB.
		"flat runs, fitted over 50, 400 subagents: the supervisor per live child | RSS 37.1 MiB + N x 59 KiB, largest residual 0 KiB; the one-time growth over idle (20.0 MiB) 17.1 MiB, anonymous 13.1 MiB | +59 KiB RSS per live child (anonymous +59 KiB); goal <= 64 KiB: met",
		"50 subagents (flat runs): the supervisor once they had all ended | RSS 30.0 MiB (anonymous 10.0 MiB), read twice the settle after their ends | +205 KiB RSS per ended subagent over idle (anonymous +123 KiB): what their runs left; no goal",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("rows lack %q:\n%s", want, text.String())
		}
	}
}

// The fitted line's slope is the supervisor's memory per live child: a
// slope over 64 KiB misses the goal however small the one-time growth; one
// N alone fits no line.
func TestLiveFitRow(t *testing.T) {
	const mib = 1 << 20
	if _, ok := liveFitRow("flat runs", []liveSlopePoint{{procs: 50, rss: 30 * mib, anon: 8 * mib}}, 24*mib, 4*mib); ok {
		t.Error("a line fitted through one N")
	}
	// 48 KiB a child over 24 MiB, one point 2 MiB above the line.
	pts := []liveSlopePoint{{50, 24*mib + 50*48<<10, 4 * mib}, {200, 24*mib + 200*48<<10 + 2*mib, 4 * mib}, {400, 24*mib + 400*48<<10, 4 * mib}}
	r, ok := liveFitRow("flat runs", pts, 24*mib, 4*mib)
	if !ok || !strings.HasSuffix(r.ratio, "goal <= 64 KiB: met") || !strings.Contains(r.what, "fitted over 50, 200, 400 subagents") {
		t.Fatalf("row %+v", r)
	}
	steep := []liveSlopePoint{{50, 10 * mib, 4 * mib}, {400, 40 * mib, 4 * mib}}
	if r, _ := liveFitRow("trees", steep, 5*mib, 4*mib); !strings.HasPrefix(r.ratio, "+88 KiB RSS per live child") || !strings.HasSuffix(r.ratio, "goal <= 64 KiB: missed") {
		t.Fatalf("steep row %+v", r)
	}
}
