package supervisor

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent"
	"github.com/agentd/agentd/internal/testkit"
)

// The real subagent (agent.Main, its loop and a builtin:script model), for
// the tests that need a real conversation.
func init() { helpers["agent"] = agent.Main }

// slotBudget is a ProcessBudget and SlotReclaimer counting the slots taken.
type slotBudget struct {
	mu   sync.Mutex
	live int
	max  int
}

func (b *slotBudget) TryAcquire() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live >= b.max {
		return false
	}
	b.live++
	return true
}

func (b *slotBudget) Release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live--
}

func (b *slotBudget) Reclaim() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live++
}

func (b *slotBudget) taken() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live
}

// pidObserver records the pid of every process a node started.
type pidObserver struct {
	mu   sync.Mutex
	pids map[string][]int // by agent path
}

func (o *pidObserver) NodeStarted(n NodeInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if n.PID > 0 {
		o.pids[n.AgentPath] = append(o.pids[n.AgentPath], n.PID)
	}
}
func (o *pidObserver) NodeProgress(n NodeInfo)                         {}
func (o *pidObserver) NodeFinished(n NodeInfo, res api.SubagentResult) {}

func (o *pidObserver) all() map[string][]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string][]int, len(o.pids))
	for k, v := range o.pids {
		out[k] = append([]int(nil), v...)
	}
	return out
}

// suspendScripts ask at depth 0, 1 and 2; each one passing the question up
// and each asker echoes what it was told and what it saw before.
var suspendScripts = map[int]string{
	0: `[depth 0]
call echo/echo {"text":"before"}
ask "Which release?" choices=1.4,2.0
answer "root told {answer}; saw {transcript}"
`,
	1: `[depth 0]
spawn sync "find the release"
pass 1
await
answer "root: {results}"
[depth 1]
ask "Which release?" choices=1.4,2.0
answer "child of {objective} told {answer}"
`,
	2: `[depth 0]
spawn sync "mid"
pass 1
await
answer "root: {results}"
[depth 1]
spawn sync "leaf"
pass 1
await
answer "mid told {answer}: {results}"
[depth 2]
ask "Which release?" choices=1.4,2.0
answer "leaf {objective} told {answer}"
`,
}

// A tree whose root's question waits past --input-hold gives back its
// processes and their slots; the answer starts each waiting subagent again
// from its stored conversation, under the same agent path, and the task
// completes with what was said before and the answer.
func TestInputHoldSuspendsAndResumes(t *testing.T) {
	want := map[int]string{
		0: `root told 2.0; saw echo/echo: tool "echo/echo" is not in this subagent's scope`,
		1: "root: child of find the release told 2.0",
		2: "root: mid told 2.0: leaf leaf told 2.0",
	}
	for depth := 0; depth <= 2; depth++ {
		t.Run(itoa(depth), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "script.txt")
			if err := os.WriteFile(file, []byte(suspendScripts[depth]), 0o600); err != nil {
				t.Fatal(err)
			}
			budget := &slotBudget{live: 1, max: 10} // the root's slot, as its run's admission holds it
			obs := &pidObserver{pids: map[string][]int{}}
			s, logs := newSupervisor(t, "agent", func(c *Config) {
				c.InputHold = 20 * time.Millisecond
				c.Budget = budget
				c.Observer = obs
				c.Caps.MaxDepth = 3
			})
			p := testPayload("when is the release?", time.Minute)
			p.Limits.MaxSteps = 10
			p.Intelligence = api.Intelligence{Endpoint: "builtin:script=" + file}
			r, err := s.Start(t.Context(), StartRequest{Payload: p, Questions: true})
			if err != nil {
				t.Fatal(err)
			}
			var q *Question
			select {
			case q = <-r.Questions():
			case <-time.After(20 * time.Second):
				t.Fatal("no question")
			}
			if q.Q.Text != "Which release?" {
				t.Fatalf("question %+v", q.Q)
			}
			// Suspended: every process reaped, every slot back.
			testkit.WaitFor(t, 20*time.Second, "the waiting tree suspended", func() bool {
				return strings.Count(logs.String(), `"msg":"subagent suspended"`) == depth+1
			})
			before := obs.all()
			if len(before) != depth+1 {
				t.Fatalf("started %v, want %d subagents", before, depth+1)
			}
			for path, pids := range before {
				if len(pids) != 1 {
					t.Fatalf("%s started %v before the answer", path, pids)
				}
				testkit.WaitGroupGone(t, pids[0])
			}
			if n := budget.taken(); n != 0 {
				t.Fatalf("%d slots taken while suspended, want 0", n)
			}
			if !q.Answer("2.0") {
				t.Fatal("the answer was not taken")
			}
			res := result(t, r, 30*time.Second)
			if res.Status != api.StatusCompleted || !strings.HasPrefix(res.Distillate.Text(), want[depth]) {
				t.Fatalf("result %s %q (%s), want completed %q", res.Status, res.Distillate.Text(), res.Detail, want[depth])
			}
			after := obs.all()
			for path, pids := range after {
				if len(pids) != 2 || pids[0] == pids[1] {
					t.Fatalf("%s ran as %v, want a second process after the answer", path, pids)
				}
				testkit.WaitGroupGone(t, pids[1])
			}
			testkit.WaitFor(t, 5*time.Second, "the slots back to the run's own", func() bool { return budget.taken() == 1 })
			if n := strings.Count(logs.String(), "resumed from a stored conversation"); n != depth+1 {
				t.Fatalf("%d subagents resumed from their conversation, want %d", n, depth+1)
			}
		})
	}
}

// A waiting tree's record (Run.Waiting), encoded as the task store keeps
// it, starts the tree again in another supervisor (a restart): each waiting
// subagent under its handle and agent path, from its conversation, with the
// answer; the first supervisor's processes are all gone by then.
func TestWaitingTreeResumesInAnotherSupervisor(t *testing.T) {
	file := filepath.Join(t.TempDir(), "script.txt")
	if err := os.WriteFile(file, []byte(suspendScripts[2]), 0o600); err != nil {
		t.Fatal(err)
	}
	caps := func(c *Config) { c.Caps.MaxDepth = 3 }
	obsA := &pidObserver{pids: map[string][]int{}}
	a, _ := newSupervisor(t, "agent", caps, func(c *Config) { c.Observer = obsA })
	p := testPayload("when is the release?", time.Minute)
	p.Limits.MaxSteps = 10
	p.Intelligence = api.Intelligence{Endpoint: "builtin:script=" + file}
	r, err := a.Start(t.Context(), StartRequest{Payload: p, Questions: true})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Questions():
	case <-time.After(20 * time.Second):
		t.Fatal("no question")
	}
	var rec []byte
	testkit.WaitFor(t, 10*time.Second, "a waiting tree's record", func() bool {
		w, ok := r.Waiting()
		if ok {
			rec, err = json.Marshal(w)
		}
		return ok && err == nil
	})
	// The first agentd goes (its processes with it).
	a.Cancel(r.Handle(), "restart")
	<-r.Done()
	for _, pids := range obsA.all() {
		testkit.WaitGroupGone(t, pids[0])
	}

	w, err := api.DecodeWaitingTree(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Nodes) != 3 || w.Question.Text != "Which release?" || w.Nodes[2].Payload.AgentPath != "0.1.1" {
		t.Fatalf("record %+v", w)
	}
	budget := &slotBudget{max: 10}
	obsB := &pidObserver{pids: map[string][]int{}}
	b, logs := newSupervisor(t, "agent", caps, func(c *Config) { c.Observer, c.Budget = obsB, budget })
	r2, err := b.Start(t.Context(), StartRequest{Handle: w.Nodes[0].Handle, Resume: w, Answer: "2.0", Questions: true})
	if err != nil {
		t.Fatal(err)
	}
	res := result(t, r2, 30*time.Second)
	if want := "root: mid told 2.0: leaf leaf told 2.0"; res.Status != api.StatusCompleted || !strings.HasPrefix(res.Distillate.Text(), want) {
		t.Fatalf("result %s %q (%s), want completed %q", res.Status, res.Distillate.Text(), res.Detail, want)
	}
	if n := strings.Count(logs.String(), "resumed from a stored conversation"); n != 3 {
		t.Fatalf("%d subagents resumed from their conversation, want 3", n)
	}
	for path, pids := range obsB.all() {
		testkit.WaitGroupGone(t, pids[0])
		if _, ok := obsA.all()[path]; !ok {
			t.Fatalf("the resumed tree started %s, not one of the first tree's paths", path)
		}
	}
	testkit.WaitFor(t, 5*time.Second, "the nested slots back", func() bool { return budget.taken() == 0 })
}

// A stored waiting tree that does not decode, or does not hold together, is
// refused by name; nothing starts.
func TestWaitingTreeBadRecord(t *testing.T) {
	for name, rec := range map[string]string{
		"not json":    `{"version":`,
		"version":     `{"version":9,"nodes":[{"handle":"h"}]}`,
		"no nodes":    `{"version":1}`,
		"no payload":  `{"version":1,"nodes":[{"handle":"h","remaining":1000}]}`,
		"orphan node": `{"version":1,"nodes":[{"handle":"h"},{"handle":"c","parent_handle":"x"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := api.DecodeWaitingTree([]byte(rec)); !errors.Is(err, api.ErrBadWaitingTree) {
				t.Fatalf("got %v, want %v", err, api.ErrBadWaitingTree)
			}
		})
	}
	s, _ := newSupervisor(t, "agent")
	if _, err := s.Start(t.Context(), StartRequest{Handle: "h", Resume: &api.WaitingTree{Version: 1}}); !errors.Is(err, api.ErrBadWaitingTree) {
		t.Fatalf("Start: %v, want %v", err, api.ErrBadWaitingTree)
	}
	if n := len(s.Live()); n != 0 {
		t.Fatalf("%d subagents live after a refused resume", n)
	}
}
