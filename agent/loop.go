package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/agentd/agentd/api"
)

// ToolCaller runs one tool call on the loop's behalf. In a subagent it is the
// control channel: the supervisor executes every tool.
type ToolCaller interface {
	CallTool(ctx context.Context, name string, args json.RawMessage) (api.ToolResult, error)
}

// Reporter receives the loop's progress events.
type Reporter interface {
	Event(step int, kind string, delta api.Usage)
}

// Loop is one ReAct loop run. A Loop is used once, by one goroutine.
type Loop struct {
	Payload *api.SpawnPayload
	Model   Model
	Tools   []ToolSpec // offered to the model; a call's Name is mapped to the spec's Wire name
	Caller  ToolCaller
	Report  Reporter
	Log     *slog.Logger
	// Hold, if set, is called before each model call and blocks while the
	// supervisor has paused the tree; an error (ctx ended) stops the loop.
	Hold func(ctx context.Context) error
}

// Run drives the loop to a terminal status. It never returns an error: every
// way a run can end is a status in the result. ctx carries the deadline and the
// cancellation cause (ErrCancelled, ErrControlClosed, context.DeadlineExceeded).
func (l *Loop) Run(ctx context.Context) api.SubagentResult {
	p := l.Payload
	req := &Request{
		System:    SystemPrompt(p),
		Messages:  []Message{{Role: RoleUser, Content: userPrompt(p)}},
		Tools:     l.Tools,
		Objective: p.Contract.Objective,
		AgentPath: p.AgentPath,
		Depth:     p.Depth,
	}
	var usage api.Usage
	var last string // the latest assistant text: the partial distillate
	result := func(s api.TerminalStatus, detail string) api.SubagentResult {
		return api.SubagentResult{Status: s, Distillate: api.InlineText(last), Usage: usage, Detail: detail}
	}
	for {
		if err := ctx.Err(); err != nil {
			return stopped(ctx, result)
		}
		if usage.Steps >= p.Limits.MaxSteps {
			return result(api.StatusExhaustedSteps, fmt.Sprintf("stopped after %d steps", usage.Steps))
		}
		if l.Hold != nil && l.Hold(ctx) != nil {
			return stopped(ctx, result)
		}
		usage.Steps++
		resp, err := l.Model.Complete(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return stopped(ctx, result)
			}
			r := result(api.StatusCrashed, err.Error())
			if errors.Is(err, ErrUnreachable) {
				r.Cause = api.CauseIntelligenceUnreachable
			}
			return r
		}
		delta := api.Usage{TokensIn: resp.Usage.TokensIn, TokensOut: resp.Usage.TokensOut, Steps: 1}
		usage.TokensIn += delta.TokensIn
		usage.TokensOut += delta.TokensOut
		l.Report.Event(usage.Steps, api.EventModel, delta)
		if resp.Content != "" {
			last = resp.Content
		}
		if usage.Tokens() > p.Limits.MaxTokens {
			return result(api.StatusExhaustedTokens, fmt.Sprintf("%d tokens used, grant %d", usage.Tokens(), p.Limits.MaxTokens))
		}
		switch resp.Finish {
		case FinishRefusal, FinishContentFilter:
			detail := resp.Refusal
			if detail == "" {
				detail = "the model refused (" + string(resp.Finish) + ")"
			}
			return result(api.StatusRefused, detail)
		}
		if len(resp.ToolCalls) == 0 {
			return result(api.StatusCompleted, "")
		}
		req.Messages = append(req.Messages, Message{Role: RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls})
		for _, tc := range resp.ToolCalls {
			wire := tc.Name
			for _, spec := range l.Tools {
				if spec.Name == tc.Name {
					wire = spec.Wire
					break
				}
			}
			// A name the model made up goes to the supervisor as is; it refuses
			// anything outside the grant with an error result the model sees.
			out, err := l.Caller.CallTool(ctx, wire, tc.Args)
			if err != nil {
				if ctx.Err() != nil {
					return stopped(ctx, result)
				}
				out = api.TextResult("tool call failed: "+err.Error(), true)
			}
			l.Report.Event(usage.Steps, api.EventToolCall, api.Usage{})
			req.Messages = append(req.Messages, Message{Role: RoleTool, ToolCallID: tc.ID, Content: toolText(out)})
		}
	}
}

// stopped maps the loop context's end to a status.
func stopped(ctx context.Context, result func(api.TerminalStatus, string) api.SubagentResult) api.SubagentResult {
	cause := context.Cause(ctx)
	if errors.Is(cause, context.DeadlineExceeded) {
		return result(api.StatusDeadline, "the deadline passed")
	}
	return result(api.StatusCancelled, cause.Error())
}

func toolText(r api.ToolResult) string {
	t := r.Text()
	if len(r.StructuredContent) > 0 && t == "" {
		t = string(r.StructuredContent)
	}
	if r.IsError {
		return "ERROR: " + t
	}
	return t
}

// SystemPrompt assembles the system prompt from the output contract and nothing
// else: the objective, the required format, tool guidance and boundaries.
func SystemPrompt(p *api.SpawnPayload) string {
	var b strings.Builder
	b.WriteString("You are a subagent with one objective. Work toward it and reply with the result only.\n\n")
	fmt.Fprintf(&b, "Objective:\n%s\n\n", p.Contract.Objective)
	switch p.Contract.OutputFormat.Kind {
	case api.FormatJSON:
		b.WriteString("Required output format: a single JSON value, with no prose around it.")
		if len(p.Contract.OutputFormat.Schema) > 0 {
			fmt.Fprintf(&b, " It must satisfy this JSON Schema:\n%s", p.Contract.OutputFormat.Schema)
		}
		b.WriteString("\n\n")
	case api.FormatMarkdown:
		b.WriteString("Required output format: Markdown.\n\n")
	default:
		b.WriteString("Required output format: plain text.\n\n")
	}
	if p.Contract.ToolGuidance != "" {
		fmt.Fprintf(&b, "Tool guidance:\n%s\n\n", p.Contract.ToolGuidance)
	}
	if p.Contract.Boundaries != "" {
		fmt.Fprintf(&b, "Boundaries:\n%s\n\n", p.Contract.Boundaries)
	}
	return strings.TrimRight(b.String(), "\n")
}

// userPrompt is the first user turn: the objective and the seed slices the
// parent chose, labeled.
func userPrompt(p *api.SpawnPayload) string {
	var b strings.Builder
	b.WriteString(p.Contract.Objective)
	for _, s := range p.Seed.Slices {
		if s.Content.ResourceRef != "" {
			fmt.Fprintf(&b, "\n\n[%s] (resource) %s", s.Label, s.Content.ResourceRef)
		} else {
			fmt.Fprintf(&b, "\n\n[%s]\n%s", s.Label, s.Content.Text)
		}
	}
	return b.String()
}
