package supervisor

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// textWatch is an Observer that hears text (TextObserver) and records it
// and the order of the calls.
type textWatch struct {
	mu    sync.Mutex
	calls []string
}

func (w *textWatch) add(s string) { w.mu.Lock(); w.calls = append(w.calls, s); w.mu.Unlock() }

func (w *textWatch) NodeStarted(NodeInfo)                          {}
func (w *textWatch) NodeProgress(NodeInfo)                         {}
func (w *textWatch) NodeFinished(n NodeInfo, _ api.SubagentResult) { w.add("finished") }
func (w *textWatch) NodeText(n NodeInfo, step int, text string) {
	w.add(fmt.Sprintf("%s %d %q", n.AgentPath, step, text))
}

// TestTextEventsReachTheObserver: a child's text events reach a
// TextObserver in order, with their steps and the node, before it hears the
// node finish; a text event's usage is not counted (the node's usage is its
// model events').
func TestTextEventsReachTheObserver(t *testing.T) {
	w := &textWatch{}
	s, _ := newSupervisor(t, "streams", func(c *Config) { c.Observer = w })
	r := start(t, s, testPayload("x", time.Minute))
	res := r.Result()
	if res.Status != api.StatusCompleted || res.Usage.TokensIn != 30 {
		t.Fatalf("result %+v: want completed with the model event's 30 tokens in", res)
	}
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end")
	}
	w.mu.Lock()
	got := strings.Join(w.calls, "; ")
	w.mu.Unlock()
	if want := `0 1 "streamed "; 0 1 "answer"; 0 2 "next turn"; finished`; got != want {
		t.Errorf("observer heard %s, want %s", got, want)
	}
}
