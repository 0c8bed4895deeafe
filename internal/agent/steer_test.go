package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// steerModel records the steering messages each request carries and calls
// during(call) while it "thinks", where a test sends steers.
type steerModel struct {
	turns  []*intelligence.Response
	during func(call int)
	seen   [][]string // per call, the steering messages in the conversation
	calls  int
}

func (m *steerModel) Complete(ctx context.Context, req *intelligence.Request) (*intelligence.Response, error) {
	var steers []string
	for _, msg := range req.Messages {
		if msg.Role == intelligence.RoleUser && strings.HasPrefix(msg.Content, api.SteerPrefix) {
			steers = append(steers, strings.TrimPrefix(msg.Content, api.SteerPrefix))
		}
	}
	m.seen = append(m.seen, steers)
	if m.during != nil {
		m.during(m.calls)
	}
	m.calls++
	return m.turns[min(m.calls, len(m.turns))-1], nil
}

// A steer sent during a model call joins the conversation before the next
// one, several in the order sent; one sent during the call that gives the
// final answer joins after that answer and the run goes on; each one taken
// is reported (loop/event kind steered).
func TestLoopTakesSteersBeforeTheNextCall(t *testing.T) {
	var q steers
	final := &intelligence.Response{Content: "done", Finish: intelligence.FinishStop}
	m := &steerModel{turns: []*intelligence.Response{toolTurn(), final, final}}
	m.during = func(call int) {
		switch call {
		case 0:
			q.add("first")
			q.add("second")
		case 1:
			q.add("third") // during the final answer's call
		}
	}
	ev := &kinds{}
	p := payload()
	p.Limits.MaxSteps = 5
	res := (&Loop{Payload: p, Model: m, Caller: &nopTools{}, Report: ev, Steered: q.take}).Run(context.Background())
	if res.Status != api.StatusCompleted || m.calls != 3 {
		t.Fatalf("status %s after %d calls, want completed after 3", res.Status, m.calls)
	}
	want := [][]string{nil, {"first", "second"}, {"first", "second", "third"}}
	for i := range want {
		if strings.Join(m.seen[i], ",") != strings.Join(want[i], ",") {
			t.Fatalf("call %d saw steers %q, want %q", i+1, m.seen[i], want[i])
		}
	}
	if ev.of[api.EventSteered] != 3 {
		t.Fatalf("%d steered events, want 3", ev.of[api.EventSteered])
	}
}

// The queue keeps at most api.MaxSteerQueued messages.
func TestSteerQueueBounded(t *testing.T) {
	var q steers
	for i := range api.MaxSteerQueued {
		if !q.add(string(rune('a' + i))) {
			t.Fatalf("message %d refused", i+1)
		}
	}
	if q.add("one too many") {
		t.Fatal("a message past the bound was queued")
	}
	if got := q.take(); len(got) != api.MaxSteerQueued || got[0] != "a" {
		t.Fatalf("took %q", got)
	}
	if got := q.take(); got != nil {
		t.Fatalf("took %q from an empty queue", got)
	}
}

type kinds struct{ of map[string]int }

func (k *kinds) Event(step int, kind string, delta api.Usage) {
	if k.of == nil {
		k.of = map[string]int{}
	}
	k.of[kind]++
}
