package api

// Steering a running subagent (docs/ARCHITECTURE.md §6.13): a message that
// joins its conversation as a user turn before its next model call. An
// operator steers any subagent (a2a.Steer), a parent's model its own
// descendants (subagent.steer); the supervisor sends it down as ctrl/steer.

// Bounds of a steering message.
const (
	MaxSteer       = 16 << 10 // bytes of one steering message
	MaxSteerQueued = 8        // messages sent to one subagent and not yet taken by its loop
)

// SteerPrefix starts the user turn a steering message becomes, so that the
// model (and a scripted intelligence) tells it from its first user turn.
const SteerPrefix = "Steering message, sent to you while you work (take it into account from now on): "

// SteerParams are the params of a2a.Steer: the subagent's handle and the
// message's text.
type SteerParams struct {
	Handle string `json:"handle"`
	Text   string `json:"text"`
}

// SteerResult reports a steer: the subagent's handle and agent path, the
// provider it runs on, and how many messages it has queued and not yet
// taken, this one included (0 for a peer's task, which took it as a
// follow-up).
type SteerResult struct {
	Handle    string `json:"handle"`
	AgentPath string `json:"agent_path,omitempty"`
	Provider  string `json:"provider"`
	Queued    int    `json:"queued"`
}

// SteerArgs are the arguments of the subagent.steer self-tool.
type SteerArgs struct {
	Handle  string `json:"handle"`
	Message string `json:"message"`
}

// Steer is the params of ctrl/steer.
type Steer struct {
	Text string `json:"text"`
}

// PauseParams are the optional params of a2a.Pause and a2a.Resume: with a
// handle only that subagent's subtree holds (or goes on); without, the
// whole service.
type PauseParams struct {
	Handle string `json:"handle,omitempty"`
}

const steerSchema = `{
  "type": "object",
  "properties": {
    "handle": {"type": "string", "description": "The handle of a running subagent below you (from subagent.spawn)."},
    "message": {"type": "string", "description": "What to tell it: it joins its conversation before its next model call."}
  },
  "required": ["handle", "message"],
  "additionalProperties": false
}`

const steerDescription = "Send a running child subagent (or one below it) a message while it works: it joins the child's conversation before its next model call, as a correction or new information. Returns at once; the child's result comes as usual."
