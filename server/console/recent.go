package console

import (
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// DefaultRecent is how many ended subagents a Recent keeps.
const DefaultRecent = 64

// Ended is a subagent that ended lately, with how it ended.
type Ended struct {
	AgentPath    string             `json:"agent_path"`
	TaskID       string             `json:"task_id"`
	ParentTaskID string             `json:"parent_task_id,omitempty"`
	RootTaskID   string             `json:"root_task_id"`
	Depth        int                `json:"depth"`
	Provider     string             `json:"provider"`
	Kind         string             `json:"kind,omitempty"` // subagent or exec
	Status       api.TerminalStatus `json:"status"`
	Cause        string             `json:"cause,omitempty"`
	Usage        api.Usage          `json:"usage"`
	MaxTokens    int64              `json:"max_tokens,omitempty"`
	Objective    string             `json:"objective,omitempty"`
	EndedAt      time.Time          `json:"ended_at"`
}

// Recent is the supervisor.Observer (and AdmissionObserver) of the console:
// it keeps the last subagents that ended and tells every open stream that
// the tree changed, at once, whenever the supervisor reports a node
// admitted, started, making progress or finished. Its methods never block.
// It is safe for concurrent use; create it with NewRecent.
type Recent struct {
	max int

	mu    sync.Mutex // guards ended, subs, texts
	ended []Ended    // oldest first, at most max
	subs  map[chan struct{}]struct{}
	texts map[string]liveText // by task id, while the subagent lives
}

// MaxText is how much of a live subagent's streamed model text the console
// shows: the last MaxText characters of its latest step's.
const MaxText = 280

// liveText is the tail of a live subagent's streamed text.
type liveText struct {
	step int
	text string
}

// NewRecent returns a Recent keeping the last max ended subagents
// (DefaultRecent when max <= 0).
func NewRecent(max int) *Recent {
	if max <= 0 {
		max = DefaultRecent
	}
	return &Recent{max: max, subs: make(map[chan struct{}]struct{})}
}

var (
	_ supervisor.Observer          = (*Recent)(nil)
	_ supervisor.AdmissionObserver = (*Recent)(nil)
	_ supervisor.TextObserver      = (*Recent)(nil)
)

// NodeText keeps the tail of the subagent's model text as it streams (a
// new step's starts over) and reports a change.
func (r *Recent) NodeText(n supervisor.NodeInfo, step int, text string) {
	r.mu.Lock()
	if r.texts == nil {
		r.texts = make(map[string]liveText)
	}
	t := r.texts[n.Handle]
	if t.step != step {
		t = liveText{step: step}
	}
	t.text = tail(t.text+text, MaxText)
	r.texts[n.Handle] = t
	r.mu.Unlock()
	r.Changed()
}

// Texts returns the tail of each live subagent's streamed model text, by
// task id.
func (r *Recent) Texts() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.texts))
	for id, t := range r.texts {
		out[id] = t.text
	}
	return out
}

// tail returns the last n characters of s, an ellipsis marking the cut.
func tail(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return "…" + string(r[len(r)-n+1:])
}

// NodeAdmitted reports a change.
func (r *Recent) NodeAdmitted(supervisor.NodeInfo) { r.Changed() }

// NodeStarted reports a change.
func (r *Recent) NodeStarted(supervisor.NodeInfo) { r.Changed() }

// NodeProgress reports a change.
func (r *Recent) NodeProgress(supervisor.NodeInfo) { r.Changed() }

// NodeFinished records the subagent as ended and reports a change.
func (r *Recent) NodeFinished(n supervisor.NodeInfo, res api.SubagentResult) {
	provider := n.Provider
	if provider == "" {
		provider = "local"
	}
	e := Ended{
		AgentPath: n.AgentPath, TaskID: n.Handle, ParentTaskID: n.ParentHandle, RootTaskID: n.RootHandle,
		Depth: n.Depth, Provider: provider, Kind: n.Kind, Status: res.Status, Cause: res.Cause, Usage: res.Usage,
		MaxTokens: n.MaxTokens, Objective: clip(n.Objective, api.MaxTreeObjective), EndedAt: time.Now().UTC(),
	}
	r.mu.Lock()
	delete(r.texts, n.Handle)
	if len(r.ended) == r.max {
		copy(r.ended, r.ended[1:])
		r.ended = r.ended[:r.max-1]
	}
	r.ended = append(r.ended, e)
	r.mu.Unlock()
	r.Changed()
}

// Changed tells every open stream to look at the service again now; the
// operator's actions call it too. It never blocks.
func (r *Recent) Changed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch := range r.subs {
		select {
		case ch <- struct{}{}:
		default: // a look is already due
		}
	}
}

// Ended returns the ended subagents kept, newest first.
func (r *Recent) Ended() []Ended {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Ended, len(r.ended))
	for i, e := range r.ended {
		out[len(r.ended)-1-i] = e
	}
	return out
}

// subscribe returns a channel that receives a value when the tree changed
// (at most one pending), and the function that stops it.
func (r *Recent) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.subs[ch] = struct{}{}
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.subs, ch)
		r.mu.Unlock()
	}
}

// clip returns s cut to at most n characters, an ellipsis marking the cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
