package agent

import (
	"sync"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// steers queues the steering messages the supervisor sends (ctrl/steer)
// until the loop takes them, before its next model call. It is safe for
// concurrent use; the zero value is empty.
type steers struct {
	mu   sync.Mutex // guards msgs
	msgs []string
}

// add queues text; past api.MaxSteerQueued it is dropped (the supervisor
// refuses more than that, so only a confused supervisor gets here) and add
// reports false.
func (s *steers) add(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.msgs) >= api.MaxSteerQueued {
		return false
	}
	s.msgs = append(s.msgs, text)
	return true
}

// take returns the queued messages, oldest first, and empties the queue.
func (s *steers) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.msgs
	s.msgs = nil
	return out
}

// steer adds the steering messages sent since the last step to the
// conversation, each a user turn, and tells the supervisor it took them. It
// reports whether there were any.
func (r *run) steer() bool {
	if r.l.Steered == nil {
		return false
	}
	msgs := r.l.Steered()
	for _, text := range msgs {
		r.req.Messages = append(r.req.Messages, intelligence.Message{Role: intelligence.RoleUser, Content: api.SteerPrefix + text})
		r.l.Report.Event(r.usage.Steps, api.EventSteered, api.Usage{})
	}
	if len(msgs) > 0 {
		r.l.Log.Info("steering messages joined the conversation", "count", len(msgs), "step", r.usage.Steps+1)
	}
	return len(msgs) > 0
}

// steerAfter takes the steering messages that came during the call that
// gave the final answer resp: the answer joins the conversation and the
// messages after it, and the run goes on. It reports whether there were any.
func (r *run) steerAfter(resp *intelligence.Response) bool {
	n := len(r.req.Messages)
	r.req.Messages = append(r.req.Messages, intelligence.Message{Role: intelligence.RoleAssistant, Content: resp.Content})
	if r.steer() {
		return true
	}
	r.req.Messages = r.req.Messages[:n]
	return false
}
