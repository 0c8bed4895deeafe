package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testkit"
)

// memoryCgroup is a memory cgroup of a test's own, made under the test
// process's cgroup: a real memory controller holding what its processes
// charge to the limit it was given.
type memoryCgroup struct {
	dir string
	v1  bool // cgroup v1's memory hierarchy; else cgroup v2
}

// newMemoryCgroup makes a memory cgroup limited to limit bytes, removed
// (once its processes are gone) when the test ends. It skips the test
// where the machine has no memory controller this process may write: the
// test is then about nothing.
func newMemoryCgroup(t *testing.T, limit uint64) *memoryCgroup {
	t.Helper()
	parent, v1, err := ownMemoryCgroup()
	if err != nil {
		t.Skipf("no memory cgroup to nest one in: %v", err)
	}
	dir := filepath.Join(parent, fmt.Sprintf("agentd-e2e-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup under %s: %v", parent, err)
	}
	cg := &memoryCgroup{dir: dir, v1: v1}
	t.Cleanup(func() { cg.remove(t) })
	file, value := "memory.max", strconv.FormatUint(limit, 10)
	if v1 {
		file = "memory.limit_in_bytes"
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		t.Skipf("cannot set %s of a memory cgroup: %v", file, err)
	}
	return cg
}

// ownMemoryCgroup finds the directory of this process's memory cgroup:
// cgroup v1's memory hierarchy where one is mounted, else the unified
// hierarchy when it has the memory controller.
func ownMemoryCgroup() (dir string, v1 bool, err error) {
	paths := map[string]string{} // hierarchy's controllers ("memory", "" for v2) -> cgroup path
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			paths[c] = f[2]
		}
	}
	mounts, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	defer mounts.Close()
	var v2Dir string
	sc := bufio.NewScanner(mounts)
	for sc.Scan() {
		// id parent dev root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		root, point := f[3], f[4]
		switch g[0] {
		case "cgroup":
			p, ok := paths["memory"]
			if !ok || !hasOption(g[2], "memory") {
				continue
			}
			rel, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/"))
			if !ok {
				continue
			}
			return filepath.Join(point, rel), true, nil
		case "cgroup2":
			if p, ok := paths[""]; ok {
				if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/")); ok {
					v2Dir = filepath.Join(point, rel)
				}
			}
		}
	}
	if v2Dir == "" {
		return "", false, errors.New("neither cgroup v1's memory hierarchy nor cgroup v2 is mounted")
	}
	ctl, err := os.ReadFile(filepath.Join(v2Dir, "cgroup.subtree_control"))
	if err != nil || !hasOption(strings.ReplaceAll(strings.TrimSpace(string(ctl)), " ", ","), "memory") {
		return "", false, fmt.Errorf("cgroup v2 at %s does not give its children the memory controller", v2Dir)
	}
	return v2Dir, false, nil
}

func hasOption(list, want string) bool {
	for _, o := range strings.Split(list, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// wrap writes a start-up script that joins the cgroup and then execs bin:
// the service is in the cgroup from its first instruction, and so is every
// child it starts.
func (cg *memoryCgroup) wrap(t *testing.T, bin string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "in-cgroup")
	body := fmt.Sprintf("#!/bin/sh\necho $$ > '%s' || exit 97\nexec '%s' \"$@\"\n", filepath.Join(cg.dir, "cgroup.procs"), bin)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// stat reads one key of a flat keyed file of the cgroup ("oom_kill 0").
func (cg *memoryCgroup) stat(file, key string) uint64 {
	b, err := os.ReadFile(filepath.Join(cg.dir, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// value reads a one-number file of the cgroup.
func (cg *memoryCgroup) value(file string) uint64 {
	b, err := os.ReadFile(filepath.Join(cg.dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// ooms is how many processes the kernel's OOM killer ended in the cgroup.
func (cg *memoryCgroup) ooms() uint64 {
	if cg.v1 {
		return cg.stat("memory.oom_control", "oom_kill")
	}
	return cg.stat("memory.events", "oom_kill")
}

// atLimit is how many times the cgroup's charge reached its limit (the
// kernel had to reclaim, or would have killed, to go on).
func (cg *memoryCgroup) atLimit() uint64 {
	if cg.v1 {
		return cg.value("memory.failcnt")
	}
	return cg.stat("memory.events", "max")
}

// peak is the most the cgroup held.
func (cg *memoryCgroup) peak() uint64 {
	if cg.v1 {
		return cg.value("memory.max_usage_in_bytes")
	}
	return cg.value("memory.peak")
}

// remove waits for the cgroup to be empty (the service's cleanup reaps it
// and its children) and removes it. A process the kernel OOM-killed in it
// fails the test.
func (cg *memoryCgroup) remove(t *testing.T) {
	if n := cg.ooms(); n > 0 {
		t.Errorf("the kernel OOM-killed %d processes in the memory cgroup (peak %d MiB)", n, cg.peak()>>20)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
		if err != nil || strings.TrimSpace(string(b)) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("memory cgroup %s still holds processes %q", cg.dir, strings.Fields(string(b)))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.Remove(cg.dir); err != nil {
		t.Errorf("remove the memory cgroup: %v", err)
	}
}

// Under a real memory controller: the service runs in a memory cgroup of
// 256 MiB, told nothing else (the limit and the memory in use are the
// cgroup's, read by the service itself), with bounds set wide (40 runs,
// within the ceiling of 62) so that only the memory gate stands between
// the pod and its limit. 40 concurrent sends of 600 KB from four callers,
// each child carrying its message several times its idle size, would take
// the pod past 256 MiB (without the gate the kernel OOM-kills the
// supervisor); the gate holds it below: the excess waits in the
// queue or is answered 429, the kernel never has to reclaim at the limit
// (the cgroup's failure count stays 0, its store in memory so no page
// cache is charged), and nothing is OOM-killed.
func TestMemoryLimitHoldsInACgroup(t *testing.T) {
	t.Parallel()
	const limit = 256 << 20
	cg := newMemoryCgroup(t, limit)
	tokens := filepath.Join(t.TempDir(), "tokens")
	callers := []string{floodToken, otherToken, "third-token-0123456789", "fourth-token-0123456789"}
	lines := opToken + " operator admin\n"
	for i, tok := range callers {
		lines += fmt.Sprintf("%s peer caller-%d\n", tok, i)
	}
	if err := os.WriteFile(tokens, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &admService{t: t, service: startServiceAs(t, cg.wrap(t, agentdBin), nil,
		"--bearer-tokens-file", tokens, "--drain-grace", "5s", "--store", "memory",
		"--intelligence", "builtin:wait", "--memory-sample-interval", "20ms",
		"--max-live-runs", "40", "--max-live-subagents", "40", "--queue-capacity", "80")}
	testkit.WaitFor(t, 10*time.Second, "the cgroup's limit and working set in use", func() bool {
		l := s.logs.String()
		return strings.Contains(l, `"memory_limit":"256MiB"`) && strings.Contains(l, `working set"`)
	})
	const burst, size = 40, 600_000
	answers := make([]sendAnswer, burst)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		token := callers[i%len(callers)] // four callers: each within its store quota
		go func() {
			defer wg.Done()
			answers[i] = s.sendText(token, i, fmt.Sprintf("wait %d %s", i, strings.Repeat("x", size)))
		}()
	}
	wg.Wait()
	if n := cg.ooms(); n > 0 {
		t.Fatalf("the kernel OOM-killed %d processes in the cgroup (peak %d MiB)", n, cg.peak()>>20)
	}
	var accepted []string
	waiting := 0
	for i, a := range answers {
		switch {
		case a.status == http.StatusOK && a.id != "":
			accepted = append(accepted, a.id)
			if a.position > 0 {
				waiting++
			}
		case a.status == http.StatusTooManyRequests:
			waiting++
			if a.retryAfter == "" {
				t.Errorf("send %d: 429 without Retry-After", i)
			}
		default:
			t.Errorf("send %d: HTTP %d, error %v", i, a.status, a.errData)
		}
	}
	testkit.WaitFor(t, 30*time.Second, "the admitted runs started", func() bool {
		a := s.tree().Admission
		return a != nil && a.Runs > 0 && a.LiveProcesses == a.Runs
	})
	for range 50 { // a few of the sampler's intervals, by the service's clock
		_ = s.tree()
	}
	a := s.tree().Admission
	t.Logf("%d x %d B: %d accepted, %d waited or shed, %d running; the cgroup's peak %d MiB of %d, at its limit %d times, %d OOM kills",
		burst, size, len(accepted), waiting, a.Runs, cg.peak()>>20, limit>>20, cg.atLimit(), cg.ooms())
	if n := cg.ooms(); n > 0 {
		t.Errorf("the kernel OOM-killed %d processes in the cgroup", n)
	}
	if n := cg.atLimit(); n > 0 {
		t.Errorf("the cgroup reached its limit %d times (peak %d MiB): admission let it", n, cg.peak()>>20)
	}
	if waiting == 0 || a.Runs >= burst {
		t.Errorf("nothing waited or was shed (%d running): the memory gate did not act", a.Runs)
	}
	for _, id := range accepted {
		if st := s.stateOf(opToken, id); st == "failed" {
			t.Errorf("task %s failed", id)
		}
		s.call(opToken, "tasks/cancel", map[string]any{"id": id}, nil)
	}
}
