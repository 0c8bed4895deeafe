package supervisor

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// keeper is a recorder that keeps every nested subagent's objective
// (ObjectiveKeeper), as a2abind's TreeObserver keeps it in the nested
// task's first message, and counts its reads.
type keeper struct {
	*recorder
	mu    sync.Mutex
	kept  map[string]string
	reads int
}

func (k *keeper) NodeAdmitted(n NodeInfo) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kept[n.Handle] = strings.Clone(n.Objective)
}

func (k *keeper) KeptObjective(n NodeInfo) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.reads++
		return k.kept[n.Handle], nil
	}
}

// A nested subagent's large objective is its ObjectiveKeeper's once its
// child has it: the node keeps its first objectiveHead characters, as a root's
// does with StartRequest.ObjectiveFrom (issue 35: in trees of a root and 8
// children, each child's 64 KiB objective was held by the supervisor for
// its whole life, about 72 KB of heap a nested child). The child got it
// whole (its answer is the big text its program carried).
func TestNestedObjectiveLeftToItsKeeper(t *testing.T) {
	k := &keeper{kept: map[string]string{}}
	s, rec := newNestingSupervisor(t, func(c *Config) {
		k.recorder = c.Observer.(*recorder)
		c.Observer = k
	})
	big := strings.Repeat("a line of the nested subagent's long objective. ", 1000) // 49 KB
	g := newGate(t)
	child := prog{WaitFile: string(g), Answer: big}
	root := prog{Calls: []progCall{spawnCall(child, api.DispositionAsync), onHandle(api.ToolAwait, 0)}}
	pl := testPayload(root.objective(), time.Minute)
	pl.Limits.MaxSteps, pl.Limits.MaxTokens = 50, 100000
	r := start(t, s, pl)
	var nested *node
	testkit.WaitFor(t, 20*time.Second, "the nested child given its payload", func() bool {
		for _, n := range s.liveNodes() {
			if p := n.getProc(); n.parent != nil && p != nil && p.spawned.Load() {
				nested = n
				return true
			}
		}
		return false
	})
	testkit.WaitFor(t, 5*time.Second, "the nested node's objective cut to its head", func() bool {
		return utf8.RuneCountInString(nested.info().Objective) <= objectiveHead
	})
	k.mu.Lock()
	if got := k.kept[nested.handle]; len(got) < len(big) {
		t.Errorf("the keeper holds %d bytes of the objective, want it whole (%d+)", len(got), len(big))
	}
	k.mu.Unlock()
	g.open(t)
	select {
	case <-r.TreeDone():
	case <-time.After(30 * time.Second):
		t.Fatal("tree did not end within 30s")
	}
	f, ok := rec.byPath(nested.payload.AgentPath)
	if !ok || f.res.Status != api.StatusCompleted || f.res.Distillate.Text() != big {
		t.Fatalf("nested child: %v %s %q..., want completed with its whole objective's answer", ok, f.res.Status, f.res.Distillate.Text()[:min(80, len(f.res.Distillate.Text()))])
	}
	if res := r.Result(); res.Status != api.StatusCompleted {
		t.Fatalf("root: %s %s", res.Status, res.Detail)
	}
}

// leaveObjective takes the payload's encoded size (the memory policy's) as
// json.Marshal's length, without keeping an encoding: the supervisor marshalled
// every large payload whole for its size, 64 KiB and more of garbage per
// nested child in figure 9's trees (issue 35).
func TestLeaveObjectiveCountsThePayloadWithoutCopyingIt(t *testing.T) {
	big := strings.Repeat("the long objective <&> é ", 3000) // 76 KB
	p := testPayload(big, time.Minute)
	whole, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	n := newNode("h", nil, p)
	n.objectiveFrom = func(context.Context) (string, error) { return big, nil }
	if _, err := jsonSize(&p); err != nil { // warm encoding/json's own buffer
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n.leaveObjective()
	runtime.ReadMemStats(&after)
	if got := n.payloadBytes.Load(); got != int64(len(whole)) {
		t.Fatalf("payload size %d, json.Marshal's %d", got, len(whole))
	}
	if utf8.RuneCountInString(n.payload.Contract.Objective) > objectiveHead {
		t.Fatalf("objective kept whole (%d bytes)", len(n.payload.Contract.Objective))
	}
	if n.encodedSize() != int64(len(whole)) {
		t.Fatalf("encodedSize %d after the objective was left, want %d", n.encodedSize(), len(whole))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<10 && !raceEnabled {
		t.Fatalf("leaving a %d-byte objective allocated %d bytes, want at most 16 KiB", len(big), alloc)
	}
	if size, err := jsonSize(func() {}); err == nil {
		t.Fatalf("jsonSize of a func: %d, no error", size)
	}
}

// A left objective's head is its first api.MaxTreeObjective characters and
// one more: every display of a node's objective (a2a.Tree's, the console's
// ended list: clip below, as theirs) shows it as it shows the whole, "…"
// included, and an ASCII head holds 161 bytes of the supervisor's heap per
// live child, where a 1 KiB head held 1024 (issue 35).
func TestLeftObjectiveShowsAsTheWhole(t *testing.T) {
	clip := func(s string, n int) string { // server's and server/console's
		if utf8.RuneCountInString(s) <= n {
			return s
		}
		return string([]rune(s)[:n-1]) + "…"
	}
	for _, c := range []struct {
		name, unit string
		maxHead    int // bytes
	}{
		{"ascii", "the long objective, line after line. ", api.MaxTreeObjective + 1},
		{"two-byte", "l'objectif très détaillé é ", 2 * (api.MaxTreeObjective + 1)},
		{"four-byte", "🙂 objective ", 4 * (api.MaxTreeObjective + 1)},
		{"invalid bytes", "objective \xff\xfe half \xe2\x82 ", api.MaxTreeObjective + 1},
	} {
		big := strings.Repeat(c.unit, 1+(leaveObjectiveAbove/len(c.unit)))
		n := newNode("h", nil, testPayload(big, time.Minute))
		n.objectiveFrom = func(context.Context) (string, error) { return big, nil }
		n.leaveObjective()
		head := n.info().Objective
		if len(head) > c.maxHead || !strings.HasPrefix(big, head) {
			t.Errorf("%s: head of %d bytes (at most %d), a prefix of the whole: %v", c.name, len(head), c.maxHead, strings.HasPrefix(big, head))
		}
		if got, want := clip(head, api.MaxTreeObjective), clip(big, api.MaxTreeObjective); got != want {
			t.Errorf("%s: the head shows as %q, the whole as %q", c.name, got, want)
		}
	}
	small := strings.Repeat("x", leaveObjectiveAbove)
	n := newNode("h", nil, testPayload(small, time.Minute))
	n.objectiveFrom = func(context.Context) (string, error) { return small, nil }
	n.leaveObjective()
	if n.info().Objective != small {
		t.Errorf("a %d-byte objective (not over leaveObjectiveAbove) was cut", len(small))
	}
}
