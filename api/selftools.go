package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Disposition says how a parent waits for a child it spawns
// (docs/ARCHITECTURE.md §5.5). The zero value means sync.
type Disposition string

// The three dispositions.
const (
	DispositionSync   Disposition = "sync"   // the spawn call returns the child's result
	DispositionAsync  Disposition = "async"  // the spawn call returns a handle at once; await it later
	DispositionDetach Disposition = "detach" // fire and forget: still counted, budgeted and reaped
)

// Normalize returns the disposition with the empty value read as sync, or an
// error for an unknown one.
func (d Disposition) Normalize() (Disposition, error) {
	switch d {
	case "", DispositionSync:
		return DispositionSync, nil
	case DispositionAsync, DispositionDetach:
		return d, nil
	}
	return "", fmt.Errorf("disposition %q: want sync, async or detach", string(d))
}

// SpawnArgs are the arguments of the subagent.spawn self-tool. Contract, Seed,
// Scope and Limits are what the parent asks for; the supervisor narrows the
// scope, clamps the limits and mints the identity. AgentID, AgentPath, Depth and
// Parent are accepted only to be discarded: a parent cannot choose them.
type SpawnArgs struct {
	Contract    OutputContract `json:"contract"`
	Seed        ContextSeed    `json:"seed"`
	Scope       ToolScope      `json:"scope"`
	Limits      Limits         `json:"limits"`
	Disposition Disposition    `json:"disposition,omitempty"`
	// Provider names where the child runs: "" or "local" for a re-exec'd child
	// of this supervisor, anything else for the delegation router (a peer).
	Provider string `json:"provider,omitempty"`
	// AgentType names a declared agent type for the child (the agents
	// file): its system prompt, intelligence, tools and limits, which only
	// narrow what the parent can grant.
	AgentType string `json:"agent_type,omitempty"`

	// Discarded at the chokepoint.
	AgentID   string `json:"agent_id,omitempty"`
	AgentPath string `json:"agent_path,omitempty"`
	Depth     *int   `json:"depth,omitempty"`
	Parent    string `json:"parent,omitempty"`
}

// HandleArgs are the arguments of subagent.status and subagent.cancel.
type HandleArgs struct {
	Handle string `json:"handle"`
}

// AwaitArgs are the arguments of subagent.await. TimeoutMS defaults to, and is
// capped at, MaxAwait.
type AwaitArgs struct {
	Handle    string `json:"handle"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// MaxAwait is the default and the longest wait of one subagent.await call.
const MaxAwait = 30 * time.Second

// Child states a ChildReport gives.
const (
	ChildRunning  = "running"  // not yet ended (starting, working or stopping)
	ChildFinished = "finished" // ended; Status, Distillate and Usage are final
	ChildAsking   = "asking"   // not ended, and waiting for the answer to its Question (subagent.answer)
)

// ChildReport is what the self-tools answer about one child: its handle and
// resource URI, its place in the tree, whether it has finished, and once it has,
// its SubagentResult fields. An async or detached spawn answers with a report
// in state running; a sync spawn and a finished await answer with the result.
type ChildReport struct {
	Handle      string         `json:"handle"`
	ResourceURI string         `json:"resource_uri"`
	AgentPath   string         `json:"agent_path,omitempty"`
	State       string         `json:"state"`
	Status      TerminalStatus `json:"status,omitempty"`
	Distillate  *ResultBody    `json:"distillate,omitempty"`
	Usage       Usage          `json:"usage"`
	Cause       string         `json:"cause,omitempty"`
	Detail      string         `json:"detail,omitempty"`
	// Cancelled is set by subagent.cancel: whether a kill ladder was started.
	Cancelled *bool `json:"cancelled,omitempty"`
	// SubtreeSize is set by subagent.cancel: how many subagents it stopped.
	SubtreeSize int `json:"subtree_size,omitempty"`
	// Question is the question the child (or a subagent below it that
	// passed it up) waits on, in state asking.
	Question *Question `json:"question,omitempty"`
}

// ResourceURI is the agent:// resource of a child's handle; a child's completion
// is an update of this resource.
func ResourceURI(handle string) string { return SubagentURIPrefix + handle }

// ReportResult fills r from a finished child's result.
func (r *ChildReport) ReportResult(res SubagentResult) {
	d := res.Distillate
	r.State = ChildFinished
	r.Status = res.Status
	r.Distillate = &d
	r.Usage = res.Usage
	r.Cause = res.Cause
	r.Detail = res.Detail
}

// ToolResult encodes the report as a tool result: the JSON as text (what a model
// reads) and as structured content.
func (r ChildReport) ToolResult() ToolResult {
	b, err := json.Marshal(r)
	if err != nil {
		return TextResult("encode child report: "+err.Error(), true)
	}
	res := TextResult(string(b), false)
	res.StructuredContent = b
	return res
}

// SelfToolSpecs describes the self-tools every subagent is offered, with the
// JSON Schemas of their arguments. The exec self-tool is not among them: it is
// offered only to a subagent whose scope holds ExecRef (ExecToolSpec).
func SelfToolSpecs() []ToolSpec {
	return append([]ToolSpec{
		{Name: ToolSpawn, Description: spawnDescription, InputSchema: json.RawMessage(spawnSchema)},
		{Name: ToolStatus, Description: "Report a child subagent's state by handle; a finished child's report carries its result.", InputSchema: json.RawMessage(handleSchema)},
		{Name: ToolAwait, Description: "Wait for a child subagent (from an async spawn) to finish, at most timeout_ms (default and maximum 30000). Returns its result, or its report in state running if it has not finished yet.", InputSchema: json.RawMessage(awaitSchema)},
		{Name: ToolCancel, Description: "Stop a child subagent and everything it spawned.", InputSchema: json.RawMessage(handleSchema)},
		{Name: ToolAsk, Description: askDescription, InputSchema: json.RawMessage(askSchema)},
		{Name: ToolAnswer, Description: "Answer the question a child subagent asked (its report is in state asking, with the question): the answer is the result of its subagent.ask, and it goes on.", InputSchema: json.RawMessage(answerSchema)},
		{Name: ToolSteer, Description: steerDescription, InputSchema: json.RawMessage(steerSchema)},
	}, resourceToolSpecs()...)
}

const askDescription = "Ask the one who gave you your objective a question, and wait for the answer, which is this call's result. " +
	"Ask only what you cannot find out or decide yourself; offer choices when the answer is one of a few. " +
	"With handle (and no question), pass up the question a child subagent asked: the answer you get is given to the child as well."

const askSchema = `{
  "type": "object",
  "properties": {
    "question": {"type": "string", "description": "the question, self-contained: the one who answers sees nothing else of your work"},
    "choices": {"type": "array", "items": {"type": "string"}, "description": "the answers to choose from, if it is one of a few"},
    "handle": {"type": "string", "description": "pass up this child's question instead of asking your own"}
  }
}`

const answerSchema = `{
  "type": "object",
  "properties": {
    "handle": {"type": "string"},
    "answer": {"type": "string"}
  },
  "required": ["handle", "answer"]
}`

const spawnDescription = "Delegate a sub-task to a new child subagent. Give it a specific objective and the output format you need; " +
	"pass only the context it needs as labeled seed slices; list the tools it may use (a subset of yours). " +
	"disposition sync (default) waits and returns the child's result; async returns a handle and its resource_uri (agent://subagent/HANDLE) to await, read or wait on later; detach runs it on its own. " +
	"A seed slice may be a resource_ref (agent://blob/ID, agent://subagent/HANDLE or an MCP resource you may read): the child is handed its content. " +
	"A refusal (a cap, the rate limit, a tool you do not hold) comes back as an error result: adapt, do not retry blindly."

const spawnSchema = `{
  "type": "object",
  "properties": {
    "contract": {
      "type": "object",
      "properties": {
        "objective": {"type": "string", "description": "the specific objective of the child"},
        "output_format": {
          "type": "object",
          "properties": {
            "kind": {"type": "string", "enum": ["text", "markdown", "json"]},
            "schema": {"description": "a JSON Schema the child's JSON answer must satisfy (kind json only)"}
          }
        },
        "tool_guidance": {"type": "string"},
        "boundaries": {"type": "string", "description": "what is in scope, what not to do, when to stop"}
      },
      "required": ["objective"]
    },
    "seed": {
      "type": "object",
      "properties": {
        "slices": {
          "type": "array",
          "items": {
            "type": "object",
            "properties": {
              "label": {"type": "string"},
              "content": {
                "type": "object",
                "properties": {"text": {"type": "string"}, "resource_ref": {"type": "string"}}
              }
            },
            "required": ["label", "content"]
          }
        }
      }
    },
    "scope": {
      "type": "object",
      "properties": {
        "allow": {
          "type": "array",
          "items": {
            "type": "object",
            "properties": {"server": {"type": "string"}, "tool": {"type": "string"}},
            "required": ["server", "tool"]
          }
        }
      }
    },
    "limits": {
      "type": "object",
      "properties": {
        "max_steps": {"type": "integer", "minimum": 1},
        "max_tokens": {"type": "integer", "minimum": 1},
        "deadline": {"type": "string", "description": "a duration such as \"90s\""},
        "max_children": {"type": "integer", "minimum": 0}
      }
    },
    "disposition": {"type": "string", "enum": ["sync", "async", "detach"]},
    "provider": {"type": "string", "description": "where the child runs: local (default) or a configured peer"},
    "agent_type": {"type": "string", "description": "a declared agent type for the child (the deployment's agents file); it only narrows the tools and limits"}
  },
  "required": ["contract"]
}`

const handleSchema = `{
  "type": "object",
  "properties": {"handle": {"type": "string"}},
  "required": ["handle"]
}`

const awaitSchema = `{
  "type": "object",
  "properties": {
    "handle": {"type": "string"},
    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 30000}
  },
  "required": ["handle"]
}`

// Question is what a subagent asks with subagent.ask: the text, the choices
// it offers (none: any text), and who asks (its agent path and handle). A
// question passed up keeps the asker it was first asked by.
type Question struct {
	Text      string   `json:"text"`
	Choices   []string `json:"choices,omitempty"`
	AgentPath string   `json:"agent_path"`
	Handle    string   `json:"handle"`
	// Tool and Arguments make it an approval: the asker's call of Tool
	// waits for a person's yes (an approval gate).
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Auth makes it a peer's request for authentication (its task is
	// auth-required): only the task's caller can give it, so a parent
	// passes it up (subagent.ask {handle}) and cannot answer it, and at the
	// root the task goes auth-required.
	Auth bool `json:"auth,omitempty"`
}

// Bounds of a question and of an answer.
const (
	MaxQuestion = 16 << 10 // bytes of a question's text
	MaxChoices  = 16       // choices of one question
	MaxChoice   = 256      // bytes of one choice
	MaxAnswer   = 64 << 10 // bytes of an answer
)

// AskArgs are the arguments of subagent.ask: a question (with choices), or
// the handle of a child whose question to pass up.
type AskArgs struct {
	Question string   `json:"question,omitempty"`
	Choices  []string `json:"choices,omitempty"`
	Handle   string   `json:"handle,omitempty"`
}

// Validate checks the arguments: a question or a handle, within the bounds.
func (a AskArgs) Validate() error {
	switch {
	case a.Handle != "" && (a.Question != "" || len(a.Choices) > 0):
		return fmt.Errorf("give a question or a handle, not both")
	case a.Handle != "":
		return nil
	case strings.TrimSpace(a.Question) == "":
		return fmt.Errorf("the question is empty")
	case len(a.Question) > MaxQuestion:
		return fmt.Errorf("the question is %d bytes, over the limit of %d", len(a.Question), MaxQuestion)
	case len(a.Choices) > MaxChoices:
		return fmt.Errorf("%d choices, over the limit of %d", len(a.Choices), MaxChoices)
	}
	for _, c := range a.Choices {
		if strings.TrimSpace(c) == "" || len(c) > MaxChoice {
			return fmt.Errorf("choice %q: want 1 to %d bytes of text", c, MaxChoice)
		}
	}
	return nil
}

// AnswerArgs are the arguments of subagent.answer.
type AnswerArgs struct {
	Handle string `json:"handle"`
	Answer string `json:"answer"`
}
