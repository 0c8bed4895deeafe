package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
	"github.com/agentd/agentd/internal/telemetry"
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

// ModelReporter is a Reporter that takes a model event with its call's
// duration and the endpoint that answered, in place of Event.
type ModelReporter interface {
	ModelEvent(step int, delta api.Usage, took time.Duration, endpoint string)
}

// BlobStore keeps a distillate too large to inline and returns its uri. In a
// subagent it is the control channel: the supervisor keeps the blob.
type BlobStore interface {
	PutBlob(ctx context.Context, mediaType, content string) (uri string, err error)
}

// stallTurns is how many empty answers in a row (no text, no tool call) end a
// run as stalled; the loop nudges the model after each but the last.
const stallTurns = 2

// Loop is one ReAct loop run. A Loop is used once, by one goroutine.
type Loop struct {
	Payload *api.SpawnPayload
	Model   intelligence.Model
	Tools   []intelligence.ToolSpec // offered to the model; a call's Name is mapped to the spec's Wire name
	Caller  ToolCaller
	Report  Reporter
	// Blobs keeps a distillate over the payload's distillate budget; without
	// one, such a distillate is truncated inline and the detail says so.
	Blobs BlobStore
	Log   *slog.Logger
	// Hold, if set, is called before each model call and blocks while the
	// supervisor has paused the tree; an error (ctx ended) stops the loop.
	Hold func(ctx context.Context) error
	// Steered, if set, returns the steering messages sent since the last
	// call (ctrl/steer): each joins the conversation as a user turn before
	// the next model call (steer.go).
	Steered func() []string
	// Stream, if set, gets the model's text as it is produced, and is
	// flushed when each model call returns. The conversation never holds it
	// before the call has returned.
	Stream Streamer
	// Idle, if set, is called (on a goroutine of its own) once a model call
	// has lasted IdleAfter, at most once a call: the run is waiting on its
	// model, as a subagent does most of its life, and Serve returns the
	// child's free memory to the system then (debug.FreeOSMemory), so a
	// waiting child keeps only what it uses. A call that answers sooner pays
	// nothing.
	Idle      func()
	IdleAfter time.Duration
}

// Run drives the loop to a terminal status. It never returns an error: every
// way a run can end is a status in the result. ctx carries the deadline and the
// cancellation cause (ErrCancelled, ErrControlClosed, context.DeadlineExceeded).
//
// The stop conditions, in the order they are checked on each step: ctx done
// (deadline or cancelled); the step cap (exhausted_steps); a context window
// too small for the system prompt (crashed; near the window the older turns
// are compacted instead, compact.go); a model error
// (crashed, with cause intelligence_unreachable when the endpoint cannot be
// reached); the token grant (exhausted_tokens); a refusal or content filter
// (refused); an answer cut at its length limit (exhausted_tokens); empty
// answers (stalled); the same tool call repeated (loop_detected); a final
// answer (completed, after at most one repair turn for a JSON schema mismatch).
//
// Each step is: beforeStep (ctx, the step cap, a pause), ask (one model
// call, accounted), judge (the grant, a refusal, a cut answer), then either
// answer (a turn without tool calls: stall, repair or finish) or callTools
// (each call run and its result added to the conversation).
func (l *Loop) Run(ctx context.Context) api.SubagentResult {
	if l.Log == nil {
		l.Log = slog.New(slog.DiscardHandler)
	}
	r, err := l.begin()
	if err != nil {
		return api.SubagentResult{Status: api.StatusCrashed, Distillate: api.InlineText(""), Detail: err.Error()}
	}
	// A resumed run (resume.go) first runs the calls its pending turn made
	// after the one that waited.
	for _, tc := range r.rest {
		if res, done := r.callTool(ctx, tc); done {
			return res
		}
	}
	r.rest = nil
	for {
		if res, done := r.beforeStep(ctx); done {
			return res
		}
		if res, done := r.compact(ctx); done {
			return res
		}
		resp, res, done := r.ask(ctx)
		if done {
			return res
		}
		if res, done := r.judge(ctx, resp); done {
			return res
		}
		if len(resp.ToolCalls) == 0 {
			if res, done := r.answer(ctx, resp); done {
				return res
			}
			continue
		}
		r.empty = 0
		if res, done := r.callTools(ctx, resp); done {
			return res
		}
	}
}

// run is the state of one Run between its steps. Each step method returns
// done with the run's result when the run ends there.
type run struct {
	l       *Loop
	p       *api.SpawnPayload
	schema  *jsonschema.Resolved // the JSON output format's, nil when none
	req     *intelligence.Request
	content bool // prompts, answers, tool arguments and results in logs and spans

	usage    api.Usage
	last     string // the latest assistant text: the partial distillate
	repaired bool   // the one repair turn for a schema mismatch is spent
	empty    int    // empty answers in a row
	lastCall string // wire name and canonical arguments of the latest tool call
	repeats  int    // how many times in a row lastCall was asked for

	// Compaction (compact.go): the context window (0: none), whether the
	// system prompt and objective fit it, the last call's reported tokens
	// and the conversation's length then, and how many compactions ran.
	window      int64
	fits        bool
	lastTokens  int64
	lastLen     int
	compactions int

	// rest is a resumed run's calls of the pending turn after the one
	// that waited (resume.go), run before its next step.
	rest []intelligence.ToolCall
}

// begin compiles the output format's schema and builds the first request:
// the system prompt, the first user turn and the offered tools.
func (l *Loop) begin() (*run, error) {
	p := l.Payload
	schema, err := compileSchema(p.Contract.OutputFormat)
	if err != nil {
		return nil, err
	}
	req := &intelligence.Request{
		System:    SystemPrompt(p),
		Messages:  []intelligence.Message{{Role: intelligence.RoleUser, Content: userPrompt(p)}},
		Tools:     l.Tools,
		Objective: p.Contract.Objective,
		AgentPath: p.AgentPath,
		Depth:     p.Depth,
	}
	r := &run{l: l, p: p, schema: schema, req: req, content: p.Telemetry.LogContent, window: l.contextWindow()}
	if p.Resume != nil {
		if err := r.resume(p.Resume); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// result is the run's result with status s: the partial distillate (the
// latest assistant text) and the usage so far, shaped to the budget.
func (r *run) result(ctx context.Context, s api.TerminalStatus, detail string) api.SubagentResult {
	return r.l.shape(ctx, api.SubagentResult{Status: s, Distillate: api.InlineText(r.last), Usage: r.usage, Detail: detail})
}

// stopped maps the loop context's end to a status.
func (r *run) stopped(ctx context.Context) api.SubagentResult {
	cause := context.Cause(ctx)
	if errors.Is(cause, context.DeadlineExceeded) {
		return r.result(ctx, api.StatusDeadline, "the deadline passed")
	}
	return r.result(ctx, api.StatusCancelled, cause.Error())
}

// beforeStep ends the run before another model call when ctx is done or the
// step cap is reached, and waits while the tree is paused.
func (r *run) beforeStep(ctx context.Context) (api.SubagentResult, bool) {
	if err := ctx.Err(); err != nil {
		return r.stopped(ctx), true
	}
	if r.usage.Steps >= r.p.Limits.MaxSteps {
		return r.result(ctx, api.StatusExhaustedSteps, fmt.Sprintf("stopped after %d steps", r.usage.Steps)), true
	}
	if r.l.Hold != nil && r.l.Hold(ctx) != nil {
		return r.stopped(ctx), true
	}
	r.steer()
	return api.SubagentResult{}, false
}

// ask makes the step's model call, under its span and logged, and accounts
// its usage: in the run's and in a model event to the reporter. A failed call
// ends the run: stopped when ctx ended, else crashed.
func (r *run) ask(ctx context.Context) (*intelligence.Response, api.SubagentResult, bool) {
	r.usage.Steps++
	r.l.logModelCall(r.usage.Steps, r.req, r.content)
	mctx, mspan := startModelSpan(ctx, r.p, r.usage.Steps, r.req)
	if st := r.l.Stream; st != nil {
		step := r.usage.Steps
		r.req.OnText = func(chunk string) { st.Text(step, chunk) }
	}
	var idle *time.Timer
	if r.l.Idle != nil {
		idle = time.AfterFunc(r.l.IdleAfter, r.l.Idle)
	}
	began := time.Now()
	resp, err := r.l.Model.Complete(mctx, r.req)
	took := time.Since(began)
	if idle != nil {
		idle.Stop()
	}
	if r.l.Stream != nil {
		r.l.Stream.Flush()
	}
	endModelSpan(mspan, resp, err, r.content)
	if err != nil {
		if ctx.Err() != nil {
			return nil, r.stopped(ctx), true
		}
		res := r.result(ctx, api.StatusCrashed, err.Error())
		if errors.Is(err, intelligence.ErrUnreachable) {
			res.Cause = api.CauseIntelligenceUnreachable
		}
		return nil, res, true
	}
	r.l.logAnswer(r.usage.Steps, resp, r.content)
	r.lastTokens, r.lastLen = resp.Usage.TokensIn+resp.Usage.TokensOut, len(r.req.Messages)
	delta := api.Usage{TokensIn: resp.Usage.TokensIn, TokensOut: resp.Usage.TokensOut, Steps: 1,
		CacheReadTokens: resp.Usage.CacheReadTokens, CacheWriteTokens: resp.Usage.CacheWriteTokens}
	r.usage.TokensIn += delta.TokensIn
	r.usage.TokensOut += delta.TokensOut
	r.usage.CacheReadTokens += delta.CacheReadTokens
	r.usage.CacheWriteTokens += delta.CacheWriteTokens
	if mr, ok := r.l.Report.(ModelReporter); ok {
		endpoint := resp.Endpoint
		if endpoint == "" {
			endpoint = r.p.Intelligence.Endpoint
		}
		mr.ModelEvent(r.usage.Steps, delta, took, endpoint)
	} else {
		r.l.Report.Event(r.usage.Steps, api.EventModel, delta)
	}
	if resp.Content != "" {
		r.last = resp.Content
	}
	return resp, api.SubagentResult{}, false
}

// judge ends the run on a turn that spent the token grant, that the model
// refused (or a content filter stopped), or that was cut at its length limit.
func (r *run) judge(ctx context.Context, resp *intelligence.Response) (api.SubagentResult, bool) {
	if r.usage.Tokens() > r.p.Limits.MaxTokens {
		return r.result(ctx, api.StatusExhaustedTokens, fmt.Sprintf("%d tokens used, grant %d", r.usage.Tokens(), r.p.Limits.MaxTokens)), true
	}
	switch resp.Finish {
	case intelligence.FinishRefusal, intelligence.FinishContentFilter:
		detail := resp.Refusal
		if detail == "" {
			detail = "the model refused (" + string(resp.Finish) + ")"
		}
		if resp.Refusal != "" && r.last == "" {
			r.last = resp.Refusal
		}
		return r.result(ctx, api.StatusRefused, detail), true
	case intelligence.FinishLength:
		// The answer (or a tool call's arguments) was cut off: the model's
		// output or context window ran out of tokens.
		return r.result(ctx, api.StatusExhaustedTokens, "the model's answer hit its length limit (finish_reason length)"), true
	}
	return api.SubagentResult{}, false
}

// answer handles a turn without tool calls. An empty one is nudged, and ends
// the run as stalled after stallTurns in a row. A text or Markdown answer
// completes the run. A JSON answer that does not satisfy the schema gets one
// repair turn; a second mismatch completes the run with the mismatch in the
// result.
func (r *run) answer(ctx context.Context, resp *intelligence.Response) (api.SubagentResult, bool) {
	if strings.TrimSpace(resp.Content) == "" {
		r.empty++
		if r.empty >= stallTurns {
			return r.result(ctx, api.StatusStalled, fmt.Sprintf("the model gave %d empty answers in a row", r.empty)), true
		}
		r.req.Messages = append(r.req.Messages,
			intelligence.Message{Role: intelligence.RoleUser, Content: "Your reply was empty. Continue toward the objective: call a tool, or reply with the result."})
		return api.SubagentResult{}, false
	}
	if r.l.Steered != nil && r.steerAfter(resp) {
		return api.SubagentResult{}, false // steered during its last call: not finished
	}
	if r.p.Contract.OutputFormat.Kind != api.FormatJSON {
		return r.result(ctx, api.StatusCompleted, ""), true
	}
	value, verr := checkJSON(r.schema, resp.Content)
	if verr == nil {
		return r.l.shape(ctx, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.ResultBody{Inline: value}, Usage: r.usage}), true
	}
	if !r.repaired {
		r.repaired = true
		if r.content {
			r.l.Log.Info("output does not match the contract: one repair turn", "err", verr)
		} else {
			r.l.Log.Info("output does not match the contract: one repair turn")
		}
		r.req.Messages = append(r.req.Messages,
			intelligence.Message{Role: intelligence.RoleAssistant, Content: resp.Content},
			intelligence.Message{Role: intelligence.RoleUser, Content: repairPrompt(verr)})
		return api.SubagentResult{}, false
	}
	// The mismatch is reported to the parent inside the result, with
	// the status preserved: it is never a crash.
	res := api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText(resp.Content), Usage: r.usage,
		Cause: api.CauseSchemaMismatch, Detail: "the output does not satisfy the output_format schema after one repair turn: " + verr.Error()}
	if value != nil {
		res.Distillate = api.ResultBody{Inline: value}
	}
	return r.l.shape(ctx, res), true
}

// callTools adds the assistant turn to the conversation and runs its tool
// calls in order, each result a tool turn. The run ends on a call repeated
// too often (loop_detected) or when ctx ends during a call.
func (r *run) callTools(ctx context.Context, resp *intelligence.Response) (api.SubagentResult, bool) {
	r.req.Messages = append(r.req.Messages, intelligence.Message{Role: intelligence.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls})
	for _, tc := range resp.ToolCalls {
		if res, done := r.callTool(ctx, tc); done {
			return res, true
		}
	}
	return api.SubagentResult{}, false
}

// callTool runs one tool call: by its wire name, with {} for empty
// arguments, unless it repeats the previous call for the max_repeats'th time
// in a row. Invalid JSON arguments are answered here and never forwarded; a
// failed call is an error result the model sees.
func (r *run) callTool(ctx context.Context, tc intelligence.ToolCall) (api.SubagentResult, bool) {
	wire := r.l.wireName(tc.Name)
	args := tc.Args
	if len(bytes.TrimSpace(args)) == 0 { // not string(args): a copy of them
		args = json.RawMessage(`{}`)
	}
	if key := callKey(wire, args); key == r.lastCall {
		r.repeats++
	} else {
		r.lastCall, r.repeats = key, 1
	}
	if r.repeats >= r.p.Limits.Repeats() {
		return r.result(ctx, api.StatusLoopDetected, fmt.Sprintf("the model asked for %s with the same arguments %d times in a row", wire, r.repeats)), true
	}
	var out api.ToolResult
	var text string // the result as the model is shown it, when the caller made it (textCaller)
	if !json.Valid(args) {
		// Never forwarded: the control frame carries arguments as JSON.
		out = api.TextResult("the arguments are not valid JSON; call the tool again with a JSON object", true)
	} else {
		// A name the model made up goes to the supervisor as is; it refuses
		// anything outside the grant with an error result the model sees.
		tctx, tspan := startToolSpan(ctx, wire, args, r.content)
		var err error
		var conv *api.Conversation
		if _, ok := r.l.Caller.(ConversationCaller); ok && wire == api.ToolAsk {
			conv = r.conversation(tc.ID)
		}
		if tcl, ok := r.l.Caller.(textCaller); ok {
			out, text, err = tcl.callText(tctx, wire, args, conv)
		} else if cc, ok := r.l.Caller.(ConversationCaller); ok && conv != nil {
			out, err = cc.CallToolWith(tctx, wire, args, conv)
		} else {
			out, err = r.l.Caller.CallTool(tctx, wire, args)
		}
		endToolSpan(tspan, out, err, r.content)
		if err != nil {
			if ctx.Err() != nil {
				return r.stopped(ctx), true
			}
			out, text = api.TextResult("tool call failed: "+err.Error(), true), ""
		}
	}
	r.l.logTool(r.usage.Steps, wire, args, out, r.content)
	r.l.Report.Event(r.usage.Steps, api.EventToolCall, api.Usage{})
	if text == "" {
		text = toolText(out)
	}
	r.req.Messages = append(r.req.Messages, intelligence.Message{Role: intelligence.RoleTool, ToolCallID: tc.ID, Content: text})
	return api.SubagentResult{}, false
}

// wireName is the control channel's name of the tool the model calls name:
// the offered spec's Wire, or name itself when no spec has it.
func (l *Loop) wireName(name string) string {
	for _, spec := range l.Tools {
		if spec.Name == name {
			return spec.Wire
		}
	}
	return name
}

// logModelCall logs a model call at debug: its step and the size of the
// conversation, and with content on, on the first step, the system prompt and
// the first user turn (later turns are tool results, logged with their calls).
func (l *Loop) logModelCall(step int, req *intelligence.Request, content bool) {
	attrs := []any{"step", step, "messages", len(req.Messages)}
	if content && step == 1 {
		attrs = append(attrs, "system", telemetry.Clip(req.System), "prompt", telemetry.Clip(req.Messages[0].Content))
	}
	l.Log.Debug("model call", attrs...)
}

// logAnswer logs a model answer at debug: its finish reason, tokens and the
// tools it asks for, and with content on, its text and the calls' arguments.
func (l *Loop) logAnswer(step int, resp *intelligence.Response, content bool) {
	names := make([]string, len(resp.ToolCalls))
	for i, tc := range resp.ToolCalls {
		names[i] = tc.Name
	}
	attrs := []any{"step", step, "finish", string(resp.Finish), "tokens_in", resp.Usage.TokensIn, "tokens_out", resp.Usage.TokensOut, "tool_calls", names}
	if content {
		attrs = append(attrs, "answer", telemetry.Clip(resp.Content))
		if len(resp.ToolCalls) > 0 {
			attrs = append(attrs, "calls", telemetry.Clip(messagesJSON([]intelligence.Message{{Role: intelligence.RoleAssistant, ToolCalls: resp.ToolCalls}})))
		}
	}
	l.Log.Debug("model answered", attrs...)
}

// logTool logs a tool call at debug: its tool and whether it failed, and with
// content on, its arguments and result.
func (l *Loop) logTool(step int, wire string, args json.RawMessage, out api.ToolResult, content bool) {
	attrs := []any{"step", step, "tool", wire, "is_error", out.IsError}
	if content {
		attrs = append(attrs, "args", telemetry.Clip(string(args)), "result", telemetry.Clip(toolText(out)))
	}
	l.Log.Debug("tool called", attrs...)
}

// summaryChars bounds the summary that stands in for a stored distillate.
const summaryChars = 1000

// blobPutTimeout bounds storing a distillate when the run's own context has
// already ended (a deadline or cancel still returns its partial result).
const blobPutTimeout = 2 * time.Second

// shape enforces the distillate budget: a distillate over it is stored through
// Blobs and replaced by a reference with a summary. When storing fails the
// distillate is truncated inline and Detail says why; the status is kept.
func (l *Loop) shape(ctx context.Context, r api.SubagentResult) api.SubagentResult {
	d := r.Distillate
	if d.Reference != nil || len(d.Inline) == 0 {
		return r
	}
	text := d.Text()
	budget := l.Payload.Limits.Budget()
	total := runeCount(text)
	if total <= budget {
		return r
	}
	mediaType := mediaTypeOf(l.Payload.Contract.OutputFormat.Kind)
	var err error = errors.New("no blob store")
	if l.Blobs != nil {
		pctx := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			pctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), blobPutTimeout)
			defer cancel()
		}
		var uri string
		if uri, err = l.Blobs.PutBlob(pctx, mediaType, text); err == nil {
			note := fmt.Sprintf("\n\n[summary: the first %%d of %d characters; the whole result is stored at the reference]", total)
			r.Distillate = api.ResultBody{Reference: &api.Reference{URI: uri, Summary: excerpt(text, min(budget, summaryChars), note)}}
			return r
		}
	}
	l.Log.Warn("distillate over budget and not stored: truncated", "chars", total, "budget", budget, "err", err)
	note := fmt.Sprintf("\n\n[truncated: the first %%d of %d characters; storing the whole result failed]", total)
	r.Distillate = api.InlineText(excerpt(text, budget, note))
	msg := fmt.Sprintf("distillate of %d characters over the budget of %d, truncated (store failed: %v)", total, budget, err)
	if r.Detail == "" {
		r.Detail = msg
	} else {
		r.Detail += "; " + msg
	}
	return r
}

// excerpt returns the head of text plus note (a format with one %d for the
// characters kept), at most limit characters in all, cut at a line or word
// boundary when one is near the end.
func excerpt(text string, limit int, note string) string {
	keep := limit - runeCount(fmt.Sprintf(note, limit))
	if keep < 0 {
		keep = 0
	}
	head := []rune(text)
	if len(head) > keep {
		head = head[:keep]
	}
	s := string(head)
	if cut := strings.LastIndexAny(s, "\n "); cut > len(s)*4/5 {
		s = s[:cut]
	}
	s = strings.TrimRight(s, " \n")
	return s + fmt.Sprintf(note, runeCount(s))
}

func runeCount(s string) int { return len([]rune(s)) }

// mediaTypeOf is the media type a stored distillate of this format has.
func mediaTypeOf(kind string) string {
	switch kind {
	case api.FormatJSON:
		return "application/json"
	case api.FormatMarkdown:
		return "text/markdown; charset=utf-8"
	default:
		return "text/plain; charset=utf-8"
	}
}

// textCaller is a ToolCaller that can return, beside a call's result, its
// text as the model is shown it (toolText's) when it made that without a
// copy; "" when it did not. The control channel does (decodeToolResult): a
// large result's text, an error's mark before it, in its frame's memory.
// A call carries conv as ConversationCaller's does (nil: none).
type textCaller interface {
	callText(ctx context.Context, name string, args json.RawMessage, conv *api.Conversation) (api.ToolResult, string, error)
}

// toolText is a tool result as the model is shown it: its text (its
// structured content when it has no text), an error's marked.
func toolText(r api.ToolResult) string {
	t := r.Text()
	if len(r.StructuredContent) > 0 && t == "" {
		t = string(r.StructuredContent)
	}
	if r.IsError {
		return errorMark + t
	}
	return t
}

// SystemPrompt assembles the system prompt from the output contract: the
// required format, tool guidance and boundaries, after the declared agent
// type's own prompt when the payload has one. The objective is not in it: it
// is the first user turn (userPrompt), and the prompt tells the model so. A
// run holds the objective once, and the model is sent it once (it was in
// both, twice the objective's tokens on every call and, in a child, a
// second copy of it on the heap all the run: figure 9's 64 KiB).
func SystemPrompt(p *api.SpawnPayload) string {
	var b strings.Builder
	// The parts' bytes and the prompt's own text, in one buffer.
	b.Grow(len(p.Contract.OutputFormat.Schema) + len(p.Contract.ToolGuidance) + len(p.Contract.Boundaries) + 1024)
	if p.Agent != nil {
		b.Grow(len(p.Agent.SystemPrompt))
	}
	if p.Agent != nil && strings.TrimSpace(p.Agent.SystemPrompt) != "" {
		// The declared agent type's prompt first; the contract's parts follow.
		b.WriteString(strings.TrimSpace(p.Agent.SystemPrompt) + "\n\n")
	}
	b.WriteString(objectiveLead)
	// The contract's parts are written as they are, not through fmt, whose
	// buffer would copy each (a part's copy stayed in fmt's pool, on a
	// waiting child's heap).
	switch p.Contract.OutputFormat.Kind {
	case api.FormatJSON:
		b.WriteString("Required output format: a single JSON value, with no prose and no code fence around it.")
		if len(p.Contract.OutputFormat.Schema) > 0 {
			b.WriteString(" It must satisfy this JSON Schema:\n")
			b.Write(p.Contract.OutputFormat.Schema)
		}
		b.WriteString("\n\n")
	case api.FormatMarkdown:
		b.WriteString("Required output format: Markdown (headings, lists, tables and code blocks where they help).\n\n")
	default:
		b.WriteString("Required output format: plain text, without Markdown markup.\n\n")
	}
	fmt.Fprintf(&b, "Keep the final answer under %d characters: it is a distillate for the agent that delegated to you, not a transcript.\n\n", p.Limits.Budget())
	if p.Contract.ToolGuidance != "" {
		b.WriteString("Tool guidance:\n")
		b.WriteString(p.Contract.ToolGuidance)
		b.WriteString("\n\n")
	}
	if p.Contract.Boundaries != "" {
		b.WriteString("Boundaries:\n")
		b.WriteString(p.Contract.Boundaries)
		b.WriteString("\n\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// objectiveLead opens the contract's part of the system prompt: where the
// objective is (the first user turn, userPrompt) and what to do with it.
const objectiveLead = "You are a subagent with one objective: the first user message states it (and after it any context your delegator chose, each part under its [label]). Work toward the objective and reply with the result only.\n\n"

// userPrompt is the first user turn: the objective and the seed slices the
// parent chose, labeled. It is the only place the objective is in the
// conversation (SystemPrompt refers to it).
func userPrompt(p *api.SpawnPayload) string {
	if len(p.Seed.Slices) == 0 {
		return p.Contract.Objective // not a copy of it: a run holds the turn all its life
	}
	var b strings.Builder
	b.WriteString(p.Contract.Objective)
	for _, s := range p.Seed.Slices {
		c := s.Content
		switch r := c.Resolved; {
		case c.ResourceRef == "":
			fmt.Fprintf(&b, "\n\n[%s]\n%s", s.Label, c.Text)
		case r == nil:
			// Not read by the supervisor (a payload from elsewhere): the
			// model is told what it is, and can read it with resource.read.
			fmt.Fprintf(&b, "\n\n[%s] (resource %s, not read: use %s)", s.Label, c.ResourceRef, api.ToolResourceRead)
		case r.Error != "":
			fmt.Fprintf(&b, "\n\n[%s] (resource %s could not be read: %s)", s.Label, c.ResourceRef, r.Error)
		default:
			note := ""
			if r.Truncated {
				note = fmt.Sprintf("; the first %d of %d bytes, read the rest with %s", len(r.Text), r.Size, api.ToolResourceRead)
			}
			if r.Base64 {
				note += "; binary, as base64"
			}
			fmt.Fprintf(&b, "\n\n[%s] (resource %s%s)\n%s", s.Label, c.ResourceRef, note, r.Text)
		}
	}
	return b.String()
}
