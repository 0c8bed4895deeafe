package api

import (
	"encoding/json"
	"strings"
	"time"
)

// The self-tools of the agent:// resource plane. The supervisor serves them to
// every subagent, outside any scope; what each read may reach is decided by the
// caller's place in its tree and by its scope.
const (
	// ToolResourceRead reads agent://subagent/HANDLE (a child's report, with
	// its result once it has finished), agent://blob/ID (a distillate stored
	// by the caller's own tree) or a resource of an MCP server whose
	// resources the caller's scope grants.
	ToolResourceRead = "resource.read"
	// ToolResourceWait waits for the next update of a resource: for
	// agent://subagent/HANDLE, the child's completion.
	ToolResourceWait = "resource.wait"
)

// SubagentURIPrefix starts the uri of a child's resource.
const SubagentURIPrefix = "agent://subagent/"

// AgentURIPrefix starts every uri the supervisor itself serves.
const AgentURIPrefix = "agent://"

// ParseSubagentURI returns the handle of an agent://subagent/HANDLE uri.
func ParseSubagentURI(uri string) (string, bool) {
	h, ok := strings.CutPrefix(uri, SubagentURIPrefix)
	return h, ok && h != "" && !strings.ContainsAny(h, "/?#")
}

// ResourcesTool, as the tool of a scope entry {SERVER, ResourcesTool}, grants
// reads of that MCP server's resources through resource.read. It is not a
// callable tool: MCP tool names have no '/', so no server's tool has this name.
// Like any entry it narrows down the tree and carries its server's Rule-of-Two
// tags.
const ResourcesTool = "resources/read"

// MaxResourceRead is the default and the largest number of bytes one
// resource.read returns; a larger resource is read in pieces with offset.
const MaxResourceRead = 64 << 10

// ResourceReadArgs are the arguments of resource.read.
type ResourceReadArgs struct {
	URI string `json:"uri"`
	// Server names the MCP server to ask for a uri that is not agent://; by
	// default every server whose resources the scope grants is asked, in
	// scope order, and the first that has the resource answers.
	Server string `json:"server,omitempty"`
	// Offset is the first byte to return; MaxBytes how many at most (default
	// and maximum MaxResourceRead). They page through a large blob or MCP
	// resource; a child's report is returned whole.
	Offset   int64 `json:"offset,omitempty"`
	MaxBytes int   `json:"max_bytes,omitempty"`
}

// ResourceWaitArgs are the arguments of resource.wait. TimeoutMS defaults to,
// and is capped at, MaxAwait.
type ResourceWaitArgs struct {
	URI       string `json:"uri"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// ResourceRead describes what one resource.read of a blob or an MCP resource
// returned, as the result's structured content; the text of the result is the
// content itself (base64 for binary content).
type ResourceRead struct {
	URI       string `json:"uri"`
	Server    string `json:"server,omitempty"` // the MCP server that answered
	MediaType string `json:"media_type,omitempty"`
	Base64    bool   `json:"base64,omitempty"` // the content is binary, given as base64
	Offset    int64  `json:"offset"`           // the first byte returned
	Bytes     int    `json:"bytes"`            // bytes returned
	Size      int64  `json:"size"`             // bytes in the whole resource
	// Next is the offset to read from for more; zero when nothing is left.
	Next int64 `json:"next,omitempty"`
}

// ResolvedResource is a resource_ref seed slice as the supervisor read it for
// the child when it started: the content, cut at the seed's byte cap (then
// Truncated is set), or Error saying why it could not be read. The child sees
// the content as the slice. A parent cannot supply it: the chokepoint discards
// whatever a spawn request carries here.
type ResolvedResource struct {
	Text      string `json:"text,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Base64    bool   `json:"base64,omitempty"`
	Size      int64  `json:"size,omitempty"` // bytes in the whole resource
	Truncated bool   `json:"truncated,omitempty"`
	Error     string `json:"error,omitempty"`
}

// WithoutResolved returns the seed with every Resolved cleared: what a parent
// may ask for.
func (s ContextSeed) WithoutResolved() ContextSeed {
	if len(s.Slices) == 0 {
		return s
	}
	out := ContextSeed{Slices: make([]SeedSlice, len(s.Slices))}
	for i, sl := range s.Slices {
		sl.Content.Resolved = nil
		out.Slices[i] = sl
	}
	return out
}

// WaitFor returns how long a wait with timeoutMS lasts: MaxAwait unless a
// shorter positive timeout is asked for.
func WaitFor(timeoutMS int64) time.Duration {
	if timeoutMS > 0 && time.Duration(timeoutMS)*time.Millisecond < MaxAwait {
		return time.Duration(timeoutMS) * time.Millisecond
	}
	return MaxAwait
}

const resourceReadDescription = "Read a resource: agent://subagent/HANDLE is a child's report (with its result once finished); " +
	"agent://blob/ID is a stored result of your own tree (a reference distillate); any other uri is a resource of an MCP server your scope grants. " +
	"Large content comes in pieces: read again with offset set to the next offset the result gives."

const resourceReadSchema = `{
  "type": "object",
  "properties": {
    "uri": {"type": "string"},
    "server": {"type": "string", "description": "the MCP server to ask (default: every server whose resources you may read)"},
    "offset": {"type": "integer", "minimum": 0},
    "max_bytes": {"type": "integer", "minimum": 1, "maximum": 65536}
  },
  "required": ["uri"]
}`

const resourceWaitDescription = "Wait for a resource to change, at most timeout_ms (default and maximum 30000): " +
	"for agent://subagent/HANDLE (the resource_uri of an async spawn) it returns when the child has finished, with its result, " +
	"or its report in state running if the wait ran out."

const resourceWaitSchema = `{
  "type": "object",
  "properties": {
    "uri": {"type": "string"},
    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 30000}
  },
  "required": ["uri"]
}`

func resourceToolSpecs() []ToolSpec {
	return []ToolSpec{
		{Name: ToolResourceRead, Description: resourceReadDescription, InputSchema: json.RawMessage(resourceReadSchema)},
		{Name: ToolResourceWait, Description: resourceWaitDescription, InputSchema: json.RawMessage(resourceWaitSchema)},
	}
}
