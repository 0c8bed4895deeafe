package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testkit"
)

// newMemoryCgroup makes a memory cgroup limited to limit bytes, removed
// once its processes are gone when the test ends; a process the kernel
// OOM-killed in it fails the test. It skips the test where the machine has
// no memory controller this process may write: the test is then about
// nothing.
func newMemoryCgroup(t *testing.T, limit uint64) *testkit.MemoryCgroup {
	t.Helper()
	cg, err := testkit.MakeMemoryCgroup(limit)
	if err != nil {
		t.Skipf("no memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		if n := cg.OOMKills(); n > 0 {
			t.Errorf("the kernel OOM-killed %d processes in the memory cgroup (peak %d MiB)", n, cg.Peak()>>20)
		}
		if err := cg.Remove(30 * time.Second); err != nil {
			t.Error(err)
		}
	})
	return cg
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
	wrapped, err := cg.Wrap(t.TempDir(), agentdBin)
	if err != nil {
		t.Fatal(err)
	}
	s := &admService{t: t, service: startServiceAs(t, wrapped, nil,
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
	if n := cg.OOMKills(); n > 0 {
		t.Fatalf("the kernel OOM-killed %d processes in the cgroup (peak %d MiB)", n, cg.Peak()>>20)
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
		burst, size, len(accepted), waiting, a.Runs, cg.Peak()>>20, limit>>20, cg.AtLimit(), cg.OOMKills())
	if n := cg.OOMKills(); n > 0 {
		t.Errorf("the kernel OOM-killed %d processes in the cgroup", n)
	}
	if n := cg.AtLimit(); n > 0 {
		t.Errorf("the cgroup reached its limit %d times (peak %d MiB): admission let it", n, cg.Peak()>>20)
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
