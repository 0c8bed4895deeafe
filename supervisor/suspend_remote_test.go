package supervisor

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// askingDelegator's delegations ask their question ("Which color?") through
// RemoteAsk, as a peer's task stopped at input-required does, and say so
// (RemoteWaiter); a resumed one (RemoteResumer) is told the answer: it ends
// "remote told ANSWER", or, with none, cancels its peer's task.
type askingDelegator struct {
	mu        sync.Mutex
	delegated int
	resumed   []string // the answers resumed with
	cancelled int      // peer's tasks cancelled
}

var wantRemoteWait = api.WaitingRemote{Peer: "peer:b", TaskID: "bt1", ContextID: "bc1", Number: 1, Key: "input-required|m1"}

type askingRemote struct {
	d      *askingDelegator
	done   chan struct{}
	res    api.SubagentResult
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	waiting bool
}

func (r *askingRemote) Done() <-chan struct{}      { return r.done }
func (r *askingRemote) Result() api.SubagentResult { <-r.done; return r.res }
func (r *askingRemote) Cancel(reason string)       { r.cancel(context.Canceled) }
func (r *askingRemote) Detach()                    { r.cancel(errDetachedTest) }
func (r *askingRemote) WaitingOn() (api.WaitingRemote, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return wantRemoteWait, r.waiting
}

var errDetachedTest = context.DeadlineExceeded

func (d *askingDelegator) Delegate(ctx context.Context, provider, handle string, p api.SpawnPayload) (Remote, error) {
	d.mu.Lock()
	d.delegated++
	d.mu.Unlock()
	ask := RemoteAsk(ctx)
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	r := &askingRemote{d: d, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(r.done)
		r.mu.Lock()
		r.waiting = true
		r.mu.Unlock()
		a, err := ask(rctx, api.Question{Text: "Which color?", AgentPath: p.AgentPath + ".1"})
		r.mu.Lock()
		r.waiting = false
		r.mu.Unlock()
		r.res = api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("remote told " + a)}
		if err != nil {
			r.res = api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText("")}
		}
	}()
	return r, nil
}

func (d *askingDelegator) ResumeRemote(ctx context.Context, provider, handle string, p api.SpawnPayload, w api.WaitingRemote, answer string) (Remote, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w != wantRemoteWait || provider != "peer:b" {
		return nil, context.Canceled
	}
	d.resumed = append(d.resumed, answer)
	r := &askingRemote{d: d, done: make(chan struct{}), cancel: func(error) {}}
	r.res = api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("remote told " + answer)}
	if answer == "" {
		d.cancelled++
		r.res = api.SubagentResult{Status: api.StatusRefused, Distillate: api.InlineText("")}
	}
	close(r.done)
	return r, nil
}

func (d *askingDelegator) state() (delegated int, resumed []string, cancelled int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.delegated, append([]string(nil), d.resumed...), d.cancelled
}

const remoteAskScript = "[depth 0]\nspawn sync \"via b\" provider=peer:b\npass 1\nawait\nanswer \"root: {results}\"\n"

// A remote child waiting on its peer's question, passed up to the root, is
// in the waiting tree's record (its peer's task) and is suspended with the
// tree past InputHold (its run detached, no new delegation); the answer
// resumes it through the delegator (the answer sent to its peer's task),
// and the root from its conversation. Stopped while suspended, its
// delegation is resumed with no answer: its peer's task is cancelled. A
// record with it starts again in another supervisor the same way.
func TestRemoteChildSuspendedAndResumed(t *testing.T) {
	for _, stop := range []bool{false, true} {
		d := &askingDelegator{}
		s, logs := newSupervisor(t, "agent", func(c *Config) {
			c.InputHold = 20 * time.Millisecond
			c.Delegator = d
		})
		r, q := startAsking(t, s, remoteAskScript)
		if q.Q.Text != "Which color?" || q.Q.AgentPath != "0.1.1" {
			t.Fatalf("question %+v", q.Q)
		}
		testkit.WaitFor(t, 20*time.Second, "the tree suspended", func() bool {
			return strings.Count(logs.String(), `"msg":"subagent suspended"`) == 1 &&
				strings.Count(logs.String(), `subagent suspended: its delegation's follow ended`) == 1
		})
		w, ok := r.Waiting()
		if !ok || len(w.Nodes) != 2 || w.Nodes[1].Remote == nil || *w.Nodes[1].Remote != wantRemoteWait || w.Validate() != nil {
			t.Fatalf("the record %+v, %v", w, ok)
		}
		if stop {
			s.Cancel(r.Handle(), "stop")
			<-r.TreeDone()
			if _, resumed, cancelled := d.state(); len(resumed) != 1 || resumed[0] != "" || cancelled != 1 {
				t.Fatalf("stopped while suspended: resumed %q, %d peer's tasks cancelled", resumed, cancelled)
			}
			continue
		}
		q.Answer("blue")
		if res := result(t, r, 20*time.Second); res.Status != api.StatusCompleted || res.Distillate.Text() != "root: remote told blue" {
			t.Fatalf("result %+v", res)
		}
		if delegated, resumed, _ := d.state(); delegated != 1 || len(resumed) != 1 || resumed[0] != "blue" {
			t.Fatalf("%d delegations, resumed with %q", delegated, resumed)
		}

		// The record, in another supervisor.
		d2 := &askingDelegator{}
		s2, _ := newSupervisor(t, "agent", func(c *Config) { c.Delegator = d2 })
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := api.DecodeWaitingTree(b)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := s2.Start(t.Context(), StartRequest{Handle: stored.Nodes[0].Handle, Questions: true, Resume: stored, Answer: "red"})
		if err != nil {
			t.Fatal(err)
		}
		if res := result(t, r2, 20*time.Second); res.Status != api.StatusCompleted || res.Distillate.Text() != "root: remote told red" {
			t.Fatalf("resumed in another supervisor: %+v", res)
		}
		if delegated, resumed, _ := d2.state(); delegated != 0 || len(resumed) != 1 || resumed[0] != "red" {
			t.Fatalf("another supervisor: %d delegations, resumed with %q", delegated, resumed)
		}
	}
}
