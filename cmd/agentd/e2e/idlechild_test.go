package e2e

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// The warm pool's next child in line rehearses its payload's path on the
// goroutine that waits, whose stack the child's start-up already grew: the
// rehearsal's own goroutine grew a second stack, 32 KiB that stayed for the
// child's life (performance.md, figure 9). The children dump the runtime's
// memory classes before and after the rehearsal (api.EnvChildMemStats): the
// stacks' class grows by no more than the stacks of the threads the runtime
// started meanwhile (a g0 and a signal stack, 48 KiB a thread; a child's
// threads vary with the machine's load), where a grown goroutine stack was 32
// KiB more.
func TestWarmChildRehearsesOnItsOwnStack(t *testing.T) {
	const threadStacks = 48 << 10
	t.Parallel()
	const pool = 2
	s := startServiceAs(t, agentdBin, []string{api.EnvChildMemStats + "=1"},
		"--warm-pool", strconv.Itoa(pool), "--intelligence", "builtin:wait", "--store", "memory")
	type dump struct{ ready, rehearsed map[string]any }
	var dumps map[float64]*dump
	testkit.WaitFor(t, 20*time.Second, "the pool's next child's memory before and after its rehearsal", func() bool {
		dumps = map[float64]*dump{}
		for _, r := range s.logs.Records("memory classes") {
			pid, _ := r["pid"].(float64)
			d := dumps[pid]
			if d == nil {
				d = &dump{}
				dumps[pid] = d
			}
			switch r["at"] {
			case "ready":
				d.ready = r
			case "rehearsed":
				d.rehearsed = r
			}
		}
		done := 0
		for _, d := range dumps {
			if d.ready != nil && d.rehearsed != nil {
				done++
			}
		}
		return done >= 1 // only the head of the pool rehearses
	})
	for pid, d := range dumps {
		if d.ready == nil || d.rehearsed == nil {
			continue
		}
		before, _ := d.ready["heap/stacks:bytes"].(float64)
		after, _ := d.rehearsed["heap/stacks:bytes"].(float64)
		threads0, _ := d.ready["/sched/threads/total:threads"].(float64)
		threads1, _ := d.rehearsed["/sched/threads/total:threads"].(float64)
		if before == 0 || threads0 == 0 || after-before > max(0, threads1-threads0)*threadStacks {
			t.Errorf("child %.0f: stacks %.0f bytes and %.0f threads before its rehearsal, %.0f and %.0f after", pid, before, threads0, after, threads1)
		}
	}
}

// A child runs without heap profile sampling or profile stacks (GODEBUG
// memprofilerate=0,profstackdepth=0, before the operator's GODEBUG so the
// operator's settings win): about 30 KiB of an idle child (performance.md,
// figure 9). AGENT_CHILD_MEMDUMP, whose heap profile needs them, leaves the
// operator's GODEBUG alone.
func TestChildGODEBUGLeadsTheOperators(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"GODEBUG=madvdontneed=1"}, "GODEBUG=memprofilerate=0,profstackdepth=0,madvdontneed=1"},
		{[]string{"GODEBUG=madvdontneed=1", "AGENT_CHILD_MEMDUMP=" + t.TempDir()}, "GODEBUG=madvdontneed=1"},
	} {
		s := startServiceAs(t, agentdBin, c.env, "--warm-pool", "1", "--intelligence", "builtin:wait", "--store", "memory")
		// The child counts once it has exec'd: between fork and exec its
		// environ is still the supervisor's (one run read that, the
		// operator's GODEBUG alone).
		var b []byte
		testkit.WaitFor(t, 20*time.Second, "the pool's child, exec'd", func() bool {
			kids := testkit.Children(s.cmd.Process.Pid)
			if len(kids) != 1 {
				return false
			}
			var err error
			b, err = os.ReadFile(fmt.Sprintf("/proc/%d/environ", kids[0]))
			return err == nil && slices.Contains(strings.Split(string(b), "\x00"), api.EnvSubagent+"=1")
		})
		var got []string
		for _, kv := range strings.Split(string(b), "\x00") {
			if strings.HasPrefix(kv, "GODEBUG=") {
				got = append(got, kv)
			}
		}
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("env %q: the child's GODEBUG is %q, want %q", c.env, got, c.want)
		}
	}
}

// Only the warm pool's next child in line (the oldest ready one, which a
// take hands out) rehearses, when the supervisor sends it ctrl/rehearse;
// after a take, the child that moved up does. Every pool child rehearsed on
// its own 5 ms after its ctrl/ready, each about 150 KiB of private memory
// larger while it waited (performance.md, figure 9).
func TestOnlyTheWarmPoolsNextChildRehearses(t *testing.T) {
	t.Parallel()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(opToken+" operator admin\npeer-token-0123456789 peer ci\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &opService{t: t, service: startServiceAs(t, agentdBin, []string{api.EnvChildMemStats + "=1"},
		"--bearer-tokens-file", tokens, "--warm-pool", "3", "--log-level", "debug", "--store", "memory")}
	rehearsed := func() []int {
		var pids []int
		for _, r := range s.logs.Records("memory classes") {
			if pid, _ := r["pid"].(float64); r["at"] == "rehearsed" {
				pids = append(pids, int(pid))
			}
		}
		return pids
	}
	idle := func() int {
		if wp := s.tree().WarmPool; wp != nil {
			return wp.Idle
		}
		return 0
	}
	testkit.WaitFor(t, 20*time.Second, "three idle children, the head rehearsed", func() bool { return idle() == 3 && len(rehearsed()) > 0 })
	got := rehearsed()
	if len(got) != 1 {
		t.Fatalf("rehearsed before any take: %v, want only the pool's head", got)
	}
	head := got[0]
	s.waitState(s.send("count these words please"), "completed")
	var served []map[string]any
	testkit.WaitFor(t, 10*time.Second, "the spawn served by the warm pool", func() bool {
		served = s.logs.Records("spawn served by the warm pool")
		return len(served) > 0
	})
	if pid, _ := served[0]["pid"].(float64); int(pid) != head {
		t.Fatalf("the take handed out %v, want the head that rehearsed, %d", served[0]["pid"], head)
	}
	testkit.WaitFor(t, 20*time.Second, "the new head's rehearsal, the pool refilled", func() bool { return len(rehearsed()) > 1 && idle() == 3 })
	got = rehearsed()
	if len(got) != 2 || got[1] == head || !slices.Contains(testkit.Children(s.cmd.Process.Pid), got[1]) {
		t.Fatalf("after the take of %d: rehearsed %v, want it and one waiting child", head, got)
	}
}

// The warm pool's next child in line maps no more of agentd's function table
// (the binary's .gopclntab) after its rehearsal than a child that did not
// rehearse: the rehearsal logged its line through slog.Logger, which unwinds
// the stack for the caller's program counter and so read the table's pages
// of agentd's own functions, and the kernel mapped 64 KiB around each fault:
// 320 KiB more of the table, 192 KiB of it mapped by no other process, the
// head's private memory (performance.md, figure 9).
func TestWarmPoolsHeadMapsNoMoreFunctionTable(t *testing.T) {
	t.Parallel()
	f, err := elf.Open(agentdBin)
	if err != nil {
		t.Fatal(err)
	}
	sec := f.Section(".gopclntab")
	f.Close()
	if sec == nil {
		t.Fatal("agentd has no .gopclntab")
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(opToken+" operator admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &opService{t: t, service: startServiceAs(t, agentdBin, []string{api.EnvChildMemStats + "=1"},
		"--bearer-tokens-file", tokens, "--warm-pool", "2", "--intelligence", "builtin:wait", "--store", "memory")}
	// mapped is how many bytes of the table's pages the process maps
	// (/proc/PID/pagemap: bit 63, present).
	mapped := func(pid int) int {
		pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
		if err != nil {
			t.Fatal(err)
		}
		defer pm.Close()
		page := uint64(os.Getpagesize())
		first, last := sec.Addr/page, (sec.Addr+sec.Size-1)/page
		b := make([]byte, 8*(last-first+1))
		if _, err := pm.ReadAt(b, int64(8*first)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := 0; i < len(b); i += 8 {
			if binary.LittleEndian.Uint64(b[i:])>>63 == 1 {
				n++
			}
		}
		return n * int(page)
	}
	// The other child is compared once it waits in the pool (it sent
	// ctrl/ready) and what it maps has not changed for 200 ms (it builds its
	// tracer provider after ctrl/ready; then it runs nothing).
	head, other, last := 0, 0, 0
	var since time.Time
	testkit.WaitFor(t, 20*time.Second, "the pool's head rehearsed, the other child settled", func() bool {
		for _, r := range s.logs.Records("memory classes") {
			if pid, _ := r["pid"].(float64); r["at"] == "rehearsed" {
				head = int(pid)
			}
		}
		for _, k := range testkit.Children(s.cmd.Process.Pid) {
			if k != head {
				other = k
			}
		}
		if wp := s.tree().WarmPool; head == 0 || other == 0 || wp == nil || wp.Idle != 2 {
			return false
		}
		if n := mapped(other); n != last {
			last, since = n, time.Now()
			return false
		}
		return time.Since(since) >= 200*time.Millisecond
	})
	h, o := mapped(head), mapped(other)
	if h-o >= 64<<10 {
		t.Fatalf("the head (%d) maps %d KiB of the function table, a child that did not rehearse (%d) %d KiB", head, h>>10, other, o>>10)
	}
}
