package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/agentd/agentd/api"
)

// Steering (a2a.Steer, subagent.steer): a message sent to a running
// subagent joins its conversation as a user turn before its next model call
// (ctrl/steer; a call in flight finishes first). Several queue in order, at
// most api.MaxSteerQueued not yet taken (the child says when it takes one:
// loop/event kind steered), each at most api.MaxSteer bytes. Which subagents
// can steer is a runtime capability of the provider they run on (seed 001):
// a local subagent's loop takes messages; a peer's task does if its Remote
// is a SteerableRemote (a follow-up to the peer's task); an exec child (a
// command) and a workflow root do not. A local spawn not started yet (held
// by a pause, or starting) gets its messages right after its payload. A steer
// that cannot be delivered is refused with the reason, and nothing changes.

// Errors of a steer.
var (
	// ErrNoSuchSubagent: no live subagent has the handle.
	ErrNoSuchSubagent = errors.New("supervisor: no live subagent with this handle")
	// ErrCannotSteer: the subagent's provider, or its state, takes no
	// message while it runs (the runtime capability is missing).
	ErrCannotSteer = errors.New("supervisor: the subagent cannot be steered")
	// ErrBadSteer: the message is empty or too large, or too many wait.
	ErrBadSteer = errors.New("supervisor: steering message refused")
)

// SteerableRemote is implemented by a Remote whose delegate takes messages
// while it runs (a peer that accepts follow-up messages): Steer sends it
// text. Its presence is the capability.
type SteerableRemote interface {
	// NotSteerable says why the delegation takes no message now (its
	// remote task not known yet, or ended); "" when it does.
	NotSteerable() string
	Steer(ctx context.Context, text string) error
}

// steerState is what the supervisor knows of steering: the messages each
// child has not taken yet, and the running remote delegations. Lock order:
// after a node's mu.
type steerState struct {
	mu      sync.Mutex         // guards pending, started, early, remotes
	pending map[*node]int      // messages sent (or to send), not yet taken
	started map[*node]bool     // children given their payload: a steer is sent at once
	early   map[*node][]string // messages for a child not given its payload yet
	remotes map[*node]Remote   // remote delegations running
}

// sendEarlySteers sends a child just given its payload the messages
// steered to it before, and sends later ones at once.
func (s *Supervisor) sendEarlySteers(n *node, p *proc) {
	st := &s.steer
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.started == nil {
		st.started = make(map[*node]bool)
	}
	st.started[n] = true
	for _, text := range st.early[n] {
		if err := p.w.Send(api.MethodSteer, 0, api.Steer{Text: text}); err != nil {
			s.log.WarnContext(n.spanCtx(), "steering message not delivered", "task_id", n.handle, "err", err)
		}
	}
	delete(st.early, n)
}

// Steer sends text to the live subagent handle (an operator's a2a.Steer; by
// names who for the log). It answers how many messages the subagent has
// waiting, this one included.
func (s *Supervisor) Steer(ctx context.Context, handle, text, by string) (api.SteerResult, error) {
	s.mu.Lock()
	n := s.nodes[handle]
	s.mu.Unlock()
	if n == nil {
		return api.SteerResult{}, fmt.Errorf("steer %s: %w (it ended, or never was)", handle, ErrNoSuchSubagent)
	}
	return s.steerNode(ctx, n, text, by)
}

// Steerable reports whether the live subagent handle can be steered now,
// and if not, why.
func (s *Supervisor) Steerable(handle string) (bool, string) {
	s.mu.Lock()
	n := s.nodes[handle]
	s.mu.Unlock()
	if n == nil {
		return false, ErrNoSuchSubagent.Error()
	}
	_, why := s.steerTarget(n)
	return why == "", why
}

// steerTarget returns n's remote delegation (nil for a local child), or why
// n cannot be steered.
func (s *Supervisor) steerTarget(n *node) (Remote, string) {
	switch {
	case n.nest.exec != nil:
		return nil, "an exec child runs a command, not a model: it takes no messages"
	case n.nest.workflow != nil:
		return nil, "a workflow root runs declared steps, not a model: steer one of its steps' subagents"
	case n.ended() || n.stopping():
		return nil, "it is ending"
	case n.nest.remote:
		s.steer.mu.Lock()
		r := s.steer.remotes[n]
		s.steer.mu.Unlock()
		if r == nil {
			return nil, fmt.Sprintf("its delegation to %s has not started", n.nest.provider)
		}
		sr, ok := r.(SteerableRemote)
		if !ok {
			return nil, fmt.Sprintf("provider %s takes no messages while it runs", n.nest.provider)
		}
		if why := sr.NotSteerable(); why != "" {
			return nil, why
		}
		return r, ""
	}
	if p := n.getProc(); p != nil && !p.controlled() {
		return nil, "it has no control channel"
	}
	return nil, "" // one not started yet gets it with its payload
}

// steerNode delivers text to n.
func (s *Supervisor) steerNode(ctx context.Context, n *node, text, by string) (api.SteerResult, error) {
	res := api.SteerResult{Handle: n.handle, AgentPath: n.payload.AgentPath, Provider: n.nest.provider}
	if res.Provider == "" {
		res.Provider = localProvider
	}
	switch {
	case strings.TrimSpace(text) == "":
		return res, fmt.Errorf("steer %s: %w: the message has no text", n.handle, ErrBadSteer)
	case len(text) > api.MaxSteer:
		return res, fmt.Errorf("steer %s: %w: the message is %d bytes, over the limit of %d", n.handle, ErrBadSteer, len(text), api.MaxSteer)
	}
	r, why := s.steerTarget(n)
	if why != "" {
		return res, fmt.Errorf("steer %s (%s, provider %s): %w: %s", n.handle, n.payload.AgentPath, res.Provider, ErrCannotSteer, why)
	}
	log := s.nodeLogger(n)
	if r != nil {
		if err := r.(SteerableRemote).Steer(ctx, text); err != nil {
			return res, fmt.Errorf("steer %s (%s, provider %s): %w", n.handle, n.payload.AgentPath, res.Provider, err)
		}
		log.Info("subagent steered", "by", by, "provider", res.Provider, "bytes", len(text))
		return res, nil
	}
	st := &s.steer
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pending[n] >= api.MaxSteerQueued {
		return res, fmt.Errorf("steer %s: %w: %d messages already wait for its next step", n.handle, ErrBadSteer, st.pending[n])
	}
	if st.started[n] {
		if err := n.getProc().w.Send(api.MethodSteer, 0, api.Steer{Text: text}); err != nil {
			return res, fmt.Errorf("steer %s: %w: %v", n.handle, ErrCannotSteer, err)
		}
	} else {
		if st.early == nil {
			st.early = make(map[*node][]string)
		}
		st.early[n] = append(st.early[n], text) // sent after its payload
	}
	if st.pending == nil {
		st.pending = make(map[*node]int)
	}
	st.pending[n]++
	res.Queued = st.pending[n]
	log.Info("subagent steered", "by", by, "provider", res.Provider, "bytes", len(text), "queued", res.Queued)
	return res, nil
}

// steerTaken counts one steering message n's loop took.
func (s *Supervisor) steerTaken(n *node) {
	st := &s.steer
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pending[n] > 0 {
		st.pending[n]--
	}
	if st.pending[n] == 0 {
		delete(st.pending, n)
	}
}

// trackRemote records n's running remote delegation r, until the returned
// function is called.
func (s *Supervisor) trackRemote(n *node, r Remote) func() {
	st := &s.steer
	st.mu.Lock()
	if st.remotes == nil {
		st.remotes = make(map[*node]Remote)
	}
	st.remotes[n] = r
	st.mu.Unlock()
	return func() {
		st.mu.Lock()
		delete(st.remotes, n)
		st.mu.Unlock()
	}
}

// forgetSteer drops what the supervisor knows of an ended node's steering.
func (s *Supervisor) forgetSteer(n *node) {
	st := &s.steer
	st.mu.Lock()
	delete(st.pending, n)
	delete(st.started, n)
	delete(st.early, n)
	st.mu.Unlock()
}

// toolSteer serves subagent.steer: a message to a running subagent below
// the caller.
func (s *Supervisor) toolSteer(ctx context.Context, caller *node, raw json.RawMessage) api.ToolResult {
	var a api.SteerArgs
	if len(raw) == 0 || json.Unmarshal(raw, &a) != nil || a.Handle == "" {
		return api.TextResult(api.ToolSteer+": bad arguments: want {\"handle\": \"...\", \"message\": \"...\"}", true)
	}
	c, ok := descendant(caller, a.Handle)
	if !ok {
		return api.TextResult(fmt.Sprintf("%s: no subagent with handle %q below this one", api.ToolSteer, a.Handle), true)
	}
	if c.ended() {
		return api.TextResult(fmt.Sprintf("%s: subagent %s has ended: it takes no messages", api.ToolSteer, a.Handle), true)
	}
	res, err := s.steerNode(ctx, c, a.Message, "parent "+caller.payload.AgentPath)
	if err != nil {
		return api.TextResult(api.ToolSteer+": "+err.Error(), true)
	}
	return api.TextResult(fmt.Sprintf("sent to %s (%s): it joins its conversation before its next model call", res.Handle, res.AgentPath), false)
}
