package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ToolExec is the gated exec self-tool: it runs a command (an argv, no shell
// unless the argv names one) as an exec child of the caller. It exists only
// when the operator allowed it, and a subagent may call it only when its scope
// holds ExecRef.
const ToolExec = "subagent.exec"

// SelfServer is the server name of the self-tools in a scope; no MCP server
// may take it.
const SelfServer = "subagent"

// ExecRef is the scope entry that grants the exec self-tool. It narrows down
// the tree like any tool, and in the Rule of Two it always carries ExecTags.
var ExecRef = ToolRef{Server: SelfServer, Tool: "exec"}

// ExecTags are the Rule-of-Two legs of ExecRef: a command can read anything
// the process can (sensitive) and send it anywhere (egress).
var ExecTags = ToolTags{Sensitive: true, Egress: true}

// Bounds of the exec self-tool's arguments.
const (
	MaxExecArgs  = 4096      // entries of argv
	MaxExecStdin = 1 << 20   // bytes of stdin
	MaxExecArgv  = 256 << 10 // bytes of argv in all
)

// ExecArgs are the arguments of the exec self-tool.
type ExecArgs struct {
	// Argv is the command: Argv[0] is the program, a path or a name looked up
	// in PATH. No shell runs unless Argv names one.
	Argv []string `json:"argv"`
	// Dir is the working directory; default the supervisor's.
	Dir string `json:"dir,omitempty"`
	// Stdin is written to the command's standard input, which is then closed;
	// without it stdin is /dev/null.
	Stdin string `json:"stdin,omitempty"`
	// TimeoutMS asks for a shorter deadline than the exec deadline; the
	// deadline is also never past the caller's own.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// Validate checks the arguments: a non-empty program, no NUL byte anywhere,
// within the bounds.
func (a ExecArgs) Validate() error {
	if len(a.Argv) == 0 || a.Argv[0] == "" {
		return errors.New("argv: want a program and its arguments, e.g. [\"ls\", \"-l\"]")
	}
	if len(a.Argv) > MaxExecArgs {
		return fmt.Errorf("argv: %d entries, at most %d", len(a.Argv), MaxExecArgs)
	}
	total := 0
	for i, s := range a.Argv {
		if strings.IndexByte(s, 0) >= 0 {
			return fmt.Errorf("argv[%d]: a NUL byte", i)
		}
		total += len(s)
	}
	if total > MaxExecArgv {
		return fmt.Errorf("argv: %d bytes, at most %d", total, MaxExecArgv)
	}
	if strings.IndexByte(a.Dir, 0) >= 0 {
		return errors.New("dir: a NUL byte")
	}
	if len(a.Stdin) > MaxExecStdin {
		return fmt.Errorf("stdin: %d bytes, at most %d", len(a.Stdin), MaxExecStdin)
	}
	if a.TimeoutMS < 0 {
		return errors.New("timeout_ms must not be negative")
	}
	return nil
}

// ExecResult is what an exec child hands back: how it ended and what it
// wrote. It is the tool result of the exec self-tool (as JSON text and
// structured content) and the inline distillate of the exec node, so
// subagent.status and resource.read on its handle report it too.
type ExecResult struct {
	Handle string `json:"handle"`
	// Status is completed when the command exited 0 on its own; crashed when
	// it exited otherwise or could not start; deadline or cancelled when the
	// supervisor stopped it.
	Status   TerminalStatus `json:"status"`
	ExitCode int            `json:"exit_code"`        // the exit status, or 128+signal
	Signal   string         `json:"signal,omitempty"` // the signal that ended it, if one did
	Stdout   string         `json:"stdout"`
	Stderr   string         `json:"stderr"`
	// StdoutBytes and StderrBytes count everything the command wrote; what is
	// over the capture cap is cut, with a note at the cut.
	StdoutBytes int64  `json:"stdout_bytes"`
	StderrBytes int64  `json:"stderr_bytes"`
	DurationMS  int64  `json:"duration_ms"`
	Detail      string `json:"detail,omitempty"`
}

// ToolResult encodes the result as a tool result; it is an error result unless
// the command exited 0.
func (r ExecResult) ToolResult() ToolResult {
	b, err := json.Marshal(r)
	if err != nil {
		return TextResult("encode exec result: "+err.Error(), true)
	}
	res := TextResult(string(b), r.Status != StatusCompleted)
	res.StructuredContent = b
	return res
}

const execDescription = "Run a command as a supervised exec child: argv is the program and its arguments (no shell unless you name one, e.g. [\"sh\", \"-c\", \"...\"]). " +
	"It runs in its own process group with a hard deadline; stdout and stderr come back, cut at a byte cap with a note. " +
	"A non-zero exit is an error result with the exit code."

const execSchema = `{
  "type": "object",
  "properties": {
    "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "dir": {"type": "string", "description": "working directory"},
    "stdin": {"type": "string"},
    "timeout_ms": {"type": "integer", "minimum": 1}
  },
  "required": ["argv"]
}`

// ExecToolSpec describes the exec self-tool, for a subagent whose scope holds
// ExecRef.
func ExecToolSpec() ToolSpec {
	return ToolSpec{Name: ToolExec, Description: execDescription, InputSchema: json.RawMessage(execSchema)}
}
