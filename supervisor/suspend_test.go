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
	cases := []struct {
		name       string
		depth      int
		drainGrace time.Duration
	}{
		{"0", 0, 0}, {"1", 1, 0}, {"2", 2, 0},
		// A process that answers the suspension's ctrl/cancel with its
		// result and does not exit within DrainGrace: the suspension's
		// ladder reaps it, not Detector "no exit after its result", whose
		// stop would end the node the suspension keeps.
		{"1-slow-exit", 1, time.Millisecond},
	}
	for _, tc := range cases {
		depth := tc.depth
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "script.txt")
			if err := os.WriteFile(file, []byte(suspendScripts[depth]), 0o600); err != nil {
				t.Fatal(err)
			}
			budget := &slotBudget{live: 1, max: 10} // the root's slot, as its run's admission holds it
			obs := &pidObserver{pids: map[string][]int{}}
			s, logs := newSupervisor(t, "agent", func(c *Config) {
				c.InputHold = 20 * time.Millisecond
				if tc.drainGrace > 0 {
					c.DrainGrace = tc.drainGrace
				}
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
		"ended root":  `{"version":1,"nodes":[{"handle":"h","ended":{"status":"completed"}}]}`,
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

// nodesOf names a record's nodes: agent path, and the status of each ended
// one.
func nodesOf(w *api.WaitingTree) string {
	var out []string
	for _, n := range w.Nodes {
		s := n.Payload.AgentPath
		if n.Ended != nil {
			s += " ended " + string(n.Ended.Status)
		}
		out = append(out, s)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// startAsking starts script in s and returns the run and its root's
// question.
func startAsking(t *testing.T, s *Supervisor, script string) (*Run, *Question) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "script.txt")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testPayload("when is the release?", time.Minute)
	p.Limits.MaxSteps = 10
	p.Intelligence = api.Intelligence{Endpoint: "builtin:script=" + file}
	r, err := s.Start(t.Context(), StartRequest{Payload: p, Questions: true})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case q := <-r.Questions():
		return r, q
	case <-time.After(20 * time.Second):
		t.Fatal("no question")
		return nil, nil
	}
}

// stopRun cancels r and waits until every process it started is gone.
func stopRun(t *testing.T, s *Supervisor, r *Run, obs *pidObserver) {
	t.Helper()
	s.Cancel(r.Handle(), "restart")
	<-r.TreeDone()
	for _, pids := range obs.all() {
		for _, pid := range pids {
			testkit.WaitGroupGone(t, pid)
		}
	}
}

// A child that had ended when its parent's question waited is in the
// waiting tree's record with its result, and a tree started from the record
// in another supervisor holds it, ended, under its handle: the resumed
// root's subagent.await of it answers with the report it had before, and
// it is not run again.
func TestWaitingTreeKeepsEndedChildren(t *testing.T) {
	const script = `[depth 0]
spawn async "A"
spawn async "B"
await
pass 2
await 1
await 2
answer "{transcript}"
[path 0.1]
answer "A finished"
[path 0.2]
ask "Which release?" choices=1.4,2.0
answer "B told {answer}"
`
	obsA := &pidObserver{pids: map[string][]int{}}
	a, _ := newSupervisor(t, "agent", func(c *Config) { c.Observer = obsA })
	r, _ := startAsking(t, a, script)
	w, ok := r.Waiting()
	if !ok {
		t.Fatal("no waiting tree")
	}
	if len(w.Nodes) != 3 || w.Nodes[1].Ended == nil || w.Nodes[1].Ended.Distillate.Text() != "A finished" || w.Nodes[2].Ended != nil {
		t.Fatalf("record %s, want the root, A ended and B waiting", nodesOf(w))
	}
	rec, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	stopRun(t, a, r, obsA)

	w, err = api.DecodeWaitingTree(rec)
	if err != nil {
		t.Fatal(err)
	}
	obsB := &pidObserver{pids: map[string][]int{}}
	b, _ := newSupervisor(t, "agent", func(c *Config) { c.Observer = obsB })
	r2, err := b.Start(t.Context(), StartRequest{Handle: w.Nodes[0].Handle, Resume: w, Answer: "2.0", Questions: true})
	if err != nil {
		t.Fatal(err)
	}
	res := result(t, r2, 30*time.Second)
	got := res.Distillate.Text()
	var reports []string
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, api.ToolAwait+": ") && strings.Contains(l, "A finished") {
			reports = append(reports, l)
		}
	}
	if res.Status != api.StatusCompleted || len(reports) != 2 || reports[0] != reports[1] || !strings.Contains(got, "B told 2.0") {
		t.Fatalf("result %s (%s), the root saw:\n%s\nwant A's same report before and after the answer, and B's", res.Status, res.Detail, got)
	}
	if _, ran := obsB.all()["0.1"]; ran {
		t.Fatal("the ended child A was run again")
	}
	<-r2.TreeDone()
}

// A subagent that waits on a question of its own, one no one passed up,
// is not answered by the root's answer: a tree holding one is not recorded.
func TestWaitingTreeOnlyTheRootsQuestion(t *testing.T) {
	const script = `[depth 0]
spawn async "C"
spawn async "B"
await
pass 2
await
answer "root: {results}"
[path 0.1]
ask "Something else?"
answer "C told {answer}"
[path 0.2]
ask "Which release?" choices=1.4,2.0
answer "B told {answer}"
`
	obs := &pidObserver{pids: map[string][]int{}}
	s, _ := newSupervisor(t, "agent", func(c *Config) { c.Observer = obs })
	r, q := startAsking(t, s, script)
	if q.Q.Text != "Which release?" {
		t.Fatalf("question %+v", q.Q)
	}
	if w, ok := r.Waiting(); ok {
		t.Fatalf("recorded %s, with C waiting on its own question", nodesOf(w))
	}
	stopRun(t, s, r, obs)
}

// A tree with a subagent still working when the root's question is posed is
// not a waiting tree; when the worker ends it becomes one (WaitingChanged
// says so), and with InputHold it is suspended then.
func TestWaitingTreeFollowsAWorkingSibling(t *testing.T) {
	const script = `[depth 0]
spawn async "worker"
spawn async "asker"
await 2
pass 2
await
answer "root: {results}"
[path 0.1]
sleep 1s
answer "worker done"
[path 0.2]
ask "Which release?" choices=1.4,2.0
answer "asker told {answer}"
`
	obs := &pidObserver{pids: map[string][]int{}}
	s, logs := newSupervisor(t, "agent", func(c *Config) { c.Observer, c.InputHold = obs, 20*time.Millisecond })
	r, q := startAsking(t, s, script)
	changed := r.WaitingChanged()
	if w, ok := r.Waiting(); ok {
		t.Fatalf("recorded %s while the worker works", nodesOf(w))
	}
	var w *api.WaitingTree
	for ok := false; !ok; {
		select {
		case <-changed:
		case <-time.After(20 * time.Second):
			t.Fatal("no change of the tree within 20s")
		}
		changed = r.WaitingChanged()
		w, ok = r.Waiting()
	}
	if len(w.Nodes) != 3 || w.Nodes[1].Ended == nil || w.Nodes[1].Ended.Distillate.Text() != "worker done" {
		t.Fatalf("record %s, want the root, the worker ended and the asker", nodesOf(w))
	}
	testkit.WaitFor(t, 20*time.Second, "the waiting tree suspended", func() bool {
		return strings.Count(logs.String(), `"msg":"subagent suspended"`) == 2
	})
	q.Answer("2.0")
	res := result(t, r, 30*time.Second)
	if want := "root: worker done\nasker told 2.0"; res.Status != api.StatusCompleted || res.Distillate.Text() != want {
		t.Fatalf("result %s %q (%s), want completed %q", res.Status, res.Distillate.Text(), res.Detail, want)
	}
	<-r.TreeDone()
}
