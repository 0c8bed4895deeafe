package a2abind

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/delegate"
)

// ExecutorConfig configures an Executor.
type ExecutorConfig struct {
	Router *delegate.Router
	// CancelHandle stops a nested subagent's subtree by handle (the supervisor's
	// Cancel); it reports whether a live subagent had that handle.
	CancelHandle func(handle, reason string) bool
	// Limits are the root grant of every run: steps, tokens, deadline, breadth.
	// A delegation from a peer gets at most these.
	Limits api.Limits
	// Intelligence is the model endpoint every run's subagents use.
	Intelligence api.Intelligence
	// Scope, if set, is asked for the root tool grant as each run starts (tool
	// servers that connect late add their tools); a peer's tool filter narrows
	// it. Nil grants no tools.
	Scope func() api.ToolScope
	// PublicURL is the service's public base URL; a distillate stored as a blob
	// becomes a file part whose uri is PublicURL + "blobs/ID" (served by
	// server's blob route). Empty keeps agent://blob/ID.
	PublicURL string
	// Instance is this agentd's id on hop lists; a message whose hops already
	// hold it is a delegation cycle and is refused.
	Instance string
	// MaxDepth, if set, is asked per message for this service's mesh-wide
	// depth cap (its --max-depth, as the operator has it now): no subagent
	// serving a message sits deeper in the mesh than the smaller of it and
	// the caller's cap (a plain client's message is depth 0, like a tree's
	// root), and a message past that cap is refused. Nil or a result <= 0 is
	// no cap of this service's own.
	MaxDepth func() int
	// Lineages, if set, records each running tree's hops and depth for nested
	// delegations (delegate.Delegator reads it).
	Lineages *delegate.Lineages
	// MaxFrame is the control frame size limit a turn's spawn payload must
	// fit (the supervisor's, api.FrameLimit of --max-message): a follow-up
	// that would take the next turn over it is refused (CheckFollowUp).
	// Zero is api.DefaultMaxFrame.
	MaxFrame int
	// AgentType, if set, is asked per message for the declared agent type
	// its root runs as, by the skill the message names (api.MetaSkill; ""
	// for none): the type's system prompt, intelligence, tools and limits,
	// which only narrow the root grant. Nil, or a nil answer, runs the root
	// as configured.
	AgentType func(skill string) *api.AgentType
	// InputTimeout, if positive, bounds how long a question of the task
	// (input-required) waits for its caller's answer: past it the task
	// ends failed, cause input_timeout. Zero waits as long as the asker's
	// own deadline allows.
	InputTimeout time.Duration
	Log          *slog.Logger
}

// Executor is the a2asrv.AgentExecutor that turns an A2A message into a
// delegation and the delegation's end into the task's final artifact and
// status. A message from another agentd carries the full contract (a data
// part) and the mesh metadata (hops, depth, budget); a plain message is an
// objective in text. Follow-up messages sent to the task while it runs become
// further turns, each seeded with the turns before it. It is safe for
// concurrent use.
type Executor struct {
	cfg  ExecutorConfig
	next nextTurns // each running task's request, for its next turn (followup.go)
}

// NewExecutor returns an executor.
func NewExecutor(cfg ExecutorConfig) *Executor {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Executor{cfg: cfg}
}

// LogTaskAccepted is the message of the log record of every task whose
// delegation started: its task_id, run_id, the caller (spiffe_id,
// caller_auth), provider, depth and hops.
const LogTaskAccepted = "task accepted"

var (
	_ a2asrv.AgentExecutor  = (*Executor)(nil)
	_ tasks.FailureMetadata = (*Executor)(nil)
)

// FailureMetadata labels the failed status the engine writes for a task whose
// run ended without a terminal event (an error or a panic): crashed.
func (x *Executor) FailureMetadata() map[string]any {
	return map[string]any{api.MetaStatus: string(api.StatusCrashed)}
}

// Execute runs the delegation for the message in reqCtx: working, then one
// turn per message (the first, then each follow-up), then the distillate
// artifact of the last turn and the terminal status. ctx is cancelled by
// tasks/cancel, which runs the kill ladder on the running turn.
//
// The goroutine that runs it waits through the task's whole run, so what
// its frames hold while it waits is what its stack keeps (issue 35): the
// request is a pointer from here down (delegate.Request by value was about
// 800 bytes in each of four frames), and the work before and after the wait
// is in helpers of its own (accept, startTurn), so the waiting frames stay
// small enough for the collector to shrink the stack the start grew.
func (x *Executor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ctx, span, req, err := x.accept(ctx, reqCtx, q)
	defer span.End()
	if req == nil {
		return err
	}
	return x.execute(ctx, reqCtx, q, req, false)
}

// accept is Execute's start: the request read from the message, with the
// delegation span. A task it refuses is ended, and req is nil.
//
//go:noinline
func (x *Executor) accept(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) (context.Context, trace.Span, *delegate.Request, error) {
	in, err := ReadInbound(reqCtx.Message, reqCtx.Metadata)
	ctx, span := startDelegateSpan(ctx, reqCtx.TaskID, in.Trace)
	if err != nil {
		return ctx, span, nil, x.refuse(ctx, reqCtx, q, api.StatusRefused, err.Error())
	}
	req, err := x.request(reqCtx, in)
	in = Inbound{} // req holds what the run needs of it
	if err != nil {
		return ctx, span, nil, x.refuse(ctx, reqCtx, q, api.StatusRefused, err.Error())
	}
	req.Caller = tasks.Owner(ctx) // whose quota the tree's blobs count against (kept for a rerun)
	if sm, ok := q.(tasks.StoredMessage); ok {
		// The task store keeps the message: nothing here holds it once the
		// turn's child has its payload (the objective is read back where
		// it is needed whole), nor does the engine (tasks.HollowAbove).
		req.ObjectiveFrom = objectiveFrom(sm, reqCtx.Metadata)
		reqCtx.Message = nil
	}
	// With a durable store the delegation is kept with the task, so that
	// the rerun recovery policy can start it again after a restart.
	if r, ok := q.(tasks.Retainer); ok {
		b, err := json.Marshal(req)
		if err == nil {
			err = r.Retain(ctx, b)
		}
		if err != nil {
			return ctx, span, nil, x.refuse(ctx, reqCtx, q, api.StatusCrashed, "the task's payload was not stored: "+err.Error())
		}
	}
	return ctx, span, &req, nil
}

var _ tasks.Rerunner = (*Executor)(nil)

// Rerun runs a task again after a restart from the delegation Execute
// retained (the rerun recovery policy): the same turns as Execute, from the
// first, with the payload the task was first given.
func (x *Executor) Rerun(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, payload []byte) error {
	req := new(delegate.Request)
	if err := json.Unmarshal(payload, req); err != nil {
		return x.refuse(ctx, reqCtx, q, api.StatusCrashed, "the task's retained payload does not decode: "+err.Error())
	}
	if x.cfg.Instance != "" && !slices.Contains(req.Hops, x.cfg.Instance) {
		req.Hops = append(req.Hops, x.cfg.Instance) // this process is on the path now
	}
	ctx, span := startDelegateSpan(ctx, reqCtx.TaskID, req.Payload.Telemetry.Traceparent)
	defer span.End()
	return x.execute(ctx, reqCtx, q, req, true)
}

// LostMetadata labels a task whose process tree agentd lost (a restart, a
// replica gone): crashed, cause supervisor_lost.
func (x *Executor) LostMetadata() map[string]any {
	return map[string]any{api.MetaStatus: string(api.StatusCrashed), api.MetaCause: api.CauseSupervisorLost}
}

// execute runs a delegation's turns: the first, then one per follow-up. A
// rerun keeps the caller metadata the first attempt recorded.
func (x *Executor) execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, req *delegate.Request, rerun bool) error {
	telemetry.SetTelemetry(ctx, &req.Payload.Telemetry) // the subagents are the delegation span's
	// The lineage lives as long as any subagent of the run's trees, detached
	// ones included: their remote delegations carry it too.
	var trees []<-chan struct{}
	if x.cfg.Lineages != nil {
		x.cfg.Lineages.Set(req.Payload.Telemetry.RunID, delegate.Lineage{Hops: req.Hops, Depth: req.Depth, MaxDepth: req.MaxDepth})
		defer func() { x.forgetLineage(req.Payload.Telemetry.RunID, trees) }()
	}
	fu, _ := q.(tasks.FollowUps)
	x.next.set(reqCtx.TaskID, req)
	defer x.next.drop(reqCtx.TaskID)
	baseSeed := req.Payload.Seed.Slices
	var turns []api.SeedSlice
	// A turn's result may be final before its process is reaped: the task's
	// events are written then, and the executor returns (which gives back
	// the task's admission slots) only once the process is gone.
	var reaped <-chan struct{}
	defer func() {
		if reaped != nil {
			<-reaped
		}
	}()
	for turn := 1; ; turn++ {
		if reaped != nil {
			<-reaped // one process of the task's at a time
		}
		// The turn alone holds its objective (runTurn), until its child has
		// it; the turns after see its head (clip), read back from the task
		// store if it keeps it (ObjectiveFrom) when a follow-up needs it.
		objective := req.Payload.Contract.Objective
		x.next.mu.Lock() // CheckFollowUp reads the Payload (nextTurns)
		req.Payload.Contract.Objective = ""
		x.next.mu.Unlock()
		asked, readAsked := "", req.ObjectiveFrom
		if readAsked == nil {
			asked = clip(objective)
		}
		t, err := x.runTurn(ctx, reqCtx, q, req, objective, turn == 1, rerun)
		req.Resume, req.Answer, req.ObjectiveFrom = nil, "", nil // a stored waiting tree resumes the first turn only (resume.go); the first message is the first turn's
		if t.tree != nil {
			trees = append(trees, t.tree)
		}
		reaped = t.reaped
		if err != nil {
			return err
		}
		if !t.ran {
			return nil // refused: the task already ended
		}
		if goOn, err := x.endTurn(ctx, reqCtx, q, fu, req, &t.res, turn, asked, readAsked, baseSeed, &turns); !goOn {
			return err
		}
	}
}

// endTurn writes what a turn's result makes of the task (execute): its
// distillate artifact, then the terminal status, or, with follow-ups to
// run, the turn's answer as a working status, and the next turn's
// objective and seed in req. It reports whether another turn runs.
//
//go:noinline
func (x *Executor) endTurn(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, fu tasks.FollowUps, req *delegate.Request,
	res *api.SubagentResult, turn int, asked string, readAsked func(context.Context) (string, error), baseSeed []api.SeedSlice, turns *[]api.SeedSlice) (bool, error) {
	if HasArtifact(*res) {
		art := &a2a.TaskArtifactUpdateEvent{TaskID: reqCtx.TaskID, ContextID: reqCtx.ContextID, Artifact: DistillateArtifactAt(reqCtx.TaskID, *res, x.cfg.PublicURL), LastChunk: true}
		if err := q.Write(ctx, art); err != nil {
			return false, err
		}
	}
	var next []*a2a.Message
	if fu != nil {
		next = fu.TakeFollowUp(true)
	}
	objective := followUpObjective(next)
	if objective == "" || res.Status != api.StatusCompleted || ctx.Err() != nil {
		final := FinalStatus(reqCtx, *res)
		if len(next) > 0 {
			final.Status.Message = a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{
				Text: fmt.Sprintf("%s; %d follow-up message(s) were not run", statusText(*res), len(next)),
			})
		}
		return false, q.Write(ctx, final)
	}
	// The turn's answer joins the history (as this status's message), and
	// the next turn runs the follow-ups with the turns so far as its seed.
	if readAsked != nil {
		o, err := readAsked(ctx)
		if err != nil {
			return false, fmt.Errorf("turn %d's request for the next turn's seed: %w", turn, err)
		}
		asked = clip(o)
	}
	*turns = append(*turns,
		api.SeedSlice{Label: fmt.Sprintf("turn %d request", turn), Content: api.SeedContent{Text: asked}},
		api.SeedSlice{Label: fmt.Sprintf("turn %d answer", turn), Content: api.SeedContent{Text: clip(nonEmpty(res.Distillate.Text()))}},
	)
	interim := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking,
		a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: res.Distillate.Text()}))
	interim.Metadata = ResultMetadata(*res)
	if err := q.Write(ctx, interim); err != nil {
		return false, err
	}
	x.next.mu.Lock() // CheckFollowUp reads the Payload (nextTurns)
	req.Payload.Contract.Objective = objective
	req.Payload.Seed.Slices = append(slices.Clip(baseSeed), *turns...)
	x.next.mu.Unlock()
	return true, nil
}

// forgetLineage drops a run's lineage once every tree it started has ended.
func (x *Executor) forgetLineage(runID string, trees []<-chan struct{}) {
	if len(trees) == 0 {
		x.cfg.Lineages.Delete(runID)
		return
	}
	go func() {
		for _, t := range trees {
			<-t
		}
		x.cfg.Lineages.Delete(runID)
	}()
}

// turnOutcome is how one turn of a task went.
type turnOutcome struct {
	res  api.SubagentResult // the delegation's result, when it ran
	ran  bool               // false: it never ran, and the task has been ended
	tree <-chan struct{}    // closed once the turn's whole tree has ended (delegate.TreeRun); nil if not known
	// reaped is closed once the turn's delegation has ended (its Done: the
	// root's process reaped), which may come after its result; nil if the
	// turn never ran.
	reaped <-chan struct{}
}

// runTurn starts one turn, objective its request's, and waits for its
// result. A turn that cannot start ends the task with a refusal and reports
// ran false.
func (x *Executor) runTurn(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, req *delegate.Request, objective string, first, rerun bool) (*turnOutcome, error) {
	run, answers, t, err := x.startTurn(ctx, reqCtx, q, req, objective, first, rerun)
	if run == nil {
		return t, err
	}
	// The result is taken as soon as it is final (delegate.SettledRun), not
	// when the process is reaped: the caller waits for t.reaped itself.
	settled, result := run.Done(), run.Result
	if sr, ok := run.(delegate.SettledRun); ok {
		settled, result = sr.Settled(), sr.SettledResult
	}
	t.reaped = run.Done()
	var questions <-chan *supervisor.Question
	timedOut := false
	if ar, ok := run.(delegate.AskingRun); ok && answers != nil {
		questions = ar.Questions()
	}
wait:
	for {
		select {
		case <-settled:
			break wait
		case <-ctx.Done():
			run.Cancel(context.Cause(ctx).Error())
			<-settled
			break wait
		case qq := <-questions:
			err := x.ask(ctx, reqCtx, q, answers, qq, settled, run)
			if errors.Is(err, errAskTimedOut) {
				timedOut, questions = true, nil
				continue
			}
			if err != nil {
				run.Cancel("task event refused")
				<-settled
				t.res, t.ran = result(), true
				return t, err
			}
		}
	}
	t.res, t.ran = result(), true
	if timedOut && t.res.Status == api.StatusCancelled {
		x.inputTimedOut(&t.res)
	}
	spanTurn(ctx, req.Provider, t.res)
	return t, nil
}

// inputTimedOut makes a turn cancelled at the input timeout a deadline.
//
//go:noinline
func (x *Executor) inputTimedOut(res *api.SubagentResult) {
	res.Status, res.Cause = api.StatusDeadline, api.CauseInputTimeout
	res.Detail = fmt.Sprintf("no answer to the task's question within the input timeout (%s)", x.cfg.InputTimeout)
}

// startTurn starts a turn's delegation (runTurn): a copy of req with the
// turn's objective and callbacks goes to the router, and the first turn
// marks the task working. With no run, the turn did not start (t and err
// say how it ended).
//
//go:noinline
func (x *Executor) startTurn(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, in *delegate.Request, objective string, first, rerun bool) (delegate.Run, tasks.Answers, *turnOutcome, error) {
	req := *in // the turn's own: its objective and callbacks are not the next turn's
	req.Payload.Contract.Objective, objective = objective, ""
	answers, _ := q.(tasks.Answers)
	req.Asks = answers != nil // the root's questions go to the task's caller (ask.go)
	if shower, ok := q.(tasks.Shower); ok {
		req.OnText = showText(shower, reqCtx) // a peer's streamed text (a local tree's goes through the TreeObserver)
	}
	run, err := x.cfg.Router.Start(ctx, req)
	req.Payload.Contract.Objective = "" // the provider has it
	if err != nil {
		status, text := api.StatusCrashed, "the delegation did not start: "+err.Error()
		switch {
		case ctx.Err() != nil: // tasks/cancel while the provider was starting
			status, text = api.StatusCancelled, "cancelled before the delegation started: "+context.Cause(ctx).Error()
		case errors.Is(err, delegate.ErrUnsupportedCapability) || errors.Is(err, ErrCycle) || errors.Is(err, ErrDepthExhausted) || errors.Is(err, delegate.ErrUnknownProvider) ||
			errors.Is(err, api.ErrFrameTooLarge): // a payload the control channel cannot carry
			status, text = api.StatusRefused, "delegation refused: "+err.Error()
		}
		return nil, nil, &turnOutcome{}, x.refuse(ctx, reqCtx, q, status, text)
	}
	t := &turnOutcome{}
	if tr, ok := run.(delegate.TreeRun); ok {
		t.tree = tr.TreeDone()
	}
	if first {
		working := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)
		if !rerun {
			working.Metadata = CallerMetadata(ctx) // who asked, on the task
			working.Metadata[api.MetaStarted] = time.Now().UTC().Format(time.RFC3339Nano)
		}
		if x.cfg.Log.Enabled(ctx, slog.LevelInfo) { // its attributes are built only for a record kept
			provider := req.Provider
			if p, err := x.cfg.Router.Route(req); err == nil {
				provider = p.Name()
			}
			x.cfg.Log.InfoContext(ctx, LogTaskAccepted, "task_id", string(reqCtx.TaskID), "run_id", req.Payload.Telemetry.RunID,
				"spiffe_id", working.Metadata[api.MetaCaller], "caller_auth", working.Metadata[api.MetaCallerAuth],
				"provider", provider, "depth", req.Depth, "hops", req.Hops, "rerun", rerun)
		}
		if err := q.Write(ctx, working); err != nil {
			run.Cancel("task event refused")
			<-run.Done()
			return nil, nil, t, err
		}
	}
	return run, answers, t, nil
}

// refuse ends a task whose delegation never started: the state status maps
// to, the exact status in metadata (as for a run that ended), text as the
// status message.
func (x *Executor) refuse(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue, status api.TerminalStatus, text string) error {
	state := StateOf(status)
	spanRefused(ctx, state, text)
	ev := a2a.NewStatusUpdateEvent(reqCtx, state, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: text}))
	ev.Final = true
	ev.Metadata = CallerMetadata(ctx)
	ev.Metadata[api.MetaStatus] = string(status)
	return q.Write(ctx, ev)
}

// Cancel stops a task the engine does not drive itself: a nested subagent.
// When no live subagent has the handle any more, the task is closed as
// canceled so it cannot stay working.
func (x *Executor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if x.cfg.CancelHandle != nil && x.cfg.CancelHandle(string(reqCtx.TaskID), "tasks/cancel") {
		return nil
	}
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// Refusals of an inbound delegation.
var (
	// ErrCycle refuses a delegation whose hop list already holds the agentd
	// it would go to (A to B to A).
	ErrCycle = errors.New("delegation cycle")
	// ErrDepthExhausted refuses a delegation whose root would sit past the
	// mesh depth cap (the cap itself is allowed, as max_depth is within one
	// agentd).
	ErrDepthExhausted = errors.New("delegation depth exhausted")
)

// request builds the delegation for a message: the objective (text parts, or
// the delegation's contract), the contract, seed and tool filter a peer sent,
// the limits clamped to the configured root grant, and the routing hints.
func (x *Executor) request(reqCtx *a2asrv.RequestContext, in Inbound) (delegate.Request, error) {
	if strings.TrimSpace(in.Objective) == "" {
		return delegate.Request{}, fmt.Errorf("the message has no text to take as the objective")
	}
	if x.cfg.Instance != "" && slices.Contains(in.Hops, x.cfg.Instance) {
		return delegate.Request{}, fmt.Errorf("%w: this agentd (%s) is already on the delegation path %v", ErrCycle, x.cfg.Instance, in.Hops)
	}
	maxDepth := 0
	if x.cfg.MaxDepth != nil {
		maxDepth = x.cfg.MaxDepth()
	}
	if in.MaxDepth > 0 && (maxDepth <= 0 || in.MaxDepth < maxDepth) {
		maxDepth = in.MaxDepth
	}
	if maxDepth > 0 && in.Depth > maxDepth {
		return delegate.Request{}, fmt.Errorf("%w: depth %d at a cap of %d", ErrDepthExhausted, in.Depth, maxDepth)
	}
	var scope api.ToolScope
	if x.cfg.Scope != nil {
		scope = x.cfg.Scope()
	}
	payload := api.SpawnPayload{
		Contract:     api.OutputContract{Objective: in.Objective, OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Scope:        scope,
		Limits:       x.cfg.Limits,
		Intelligence: x.cfg.Intelligence,
		Telemetry:    api.Telemetry{RunID: uuid.Must(uuid.NewV7()).String(), Traceparent: in.Trace},
	}
	if d := in.Delegation; d != nil {
		payload.Contract = d.Contract
		payload.Contract.Objective = in.Objective
		if payload.Contract.OutputFormat.Kind == "" {
			payload.Contract.OutputFormat.Kind = api.FormatText
		}
		payload.Seed = d.Seed
		if d.Scope != nil {
			payload.Scope = narrowScope(scope, *d.Scope)
		}
		payload.Limits = clampLimits(x.cfg.Limits, d.Limits)
		payload.Telemetry.TraceID = d.Telemetry.TraceID
		payload.Telemetry.ParentSpanID = d.Telemetry.ParentSpanID
		if payload.Telemetry.Traceparent == "" {
			payload.Telemetry.Traceparent = d.Telemetry.Traceparent
		}
		payload.Telemetry.LogLevel = d.Telemetry.LogLevel
	}
	if b := in.Budget; b != nil {
		payload.Limits = clampLimits(payload.Limits, api.Limits{
			MaxSteps: b.MaxSteps, MaxTokens: b.MaxTokens, Deadline: api.Duration(time.Duration(b.DeadlineMS) * time.Millisecond),
		})
	}
	if err := payload.Contract.Validate(); err != nil {
		return delegate.Request{}, err
	}
	depthLimit := 0
	if x.cfg.AgentType != nil {
		if t := x.cfg.AgentType(in.Skill); t != nil {
			t.Apply(&payload, nil)
			depthLimit = t.MaxDepth
		}
	}
	hops := slices.Clone(in.Hops)
	if x.cfg.Instance != "" {
		hops = append(hops, x.cfg.Instance)
	}
	return delegate.Request{
		Handle:   string(reqCtx.TaskID),
		Payload:  payload,
		Provider: in.Provider,
		Skill:    in.Skill,
		Hops:     hops,
		Depth:    in.Depth,
		MaxDepth: maxDepth,

		DepthLimit: depthLimit,
	}, nil
}

// clampLimits returns grant lowered to every positive field of asked.
func clampLimits(grant, asked api.Limits) api.Limits {
	out := grant
	if asked.MaxSteps > 0 && asked.MaxSteps < out.MaxSteps {
		out.MaxSteps = asked.MaxSteps
	}
	if asked.MaxTokens > 0 && asked.MaxTokens < out.MaxTokens {
		out.MaxTokens = asked.MaxTokens
	}
	if asked.Deadline > 0 && asked.Deadline < out.Deadline {
		out.Deadline = asked.Deadline
	}
	if asked.MaxChildren > 0 && asked.MaxChildren < out.MaxChildren {
		out.MaxChildren = asked.MaxChildren
	}
	return out
}

// narrowScope keeps the tools of the filter that the grant holds: a tool
// filter never widens a grant.
func narrowScope(grant, filter api.ToolScope) api.ToolScope {
	out := api.ToolScope{Tags: grant.Tags}
	for _, ref := range filter.Allow {
		if grant.Holds(ref) {
			out.Allow = append(out.Allow, ref)
		}
	}
	return out
}

func followUpObjective(msgs []*a2a.Message) string {
	var texts []string
	for _, m := range msgs {
		for _, p := range m.Parts {
			if t, ok := p.(a2a.TextPart); ok && strings.TrimSpace(t.Text) != "" {
				texts = append(texts, t.Text)
			}
		}
	}
	return strings.Join(texts, "\n")
}

// maxSeedText bounds one seed slice carried from an earlier turn.
const maxSeedText = 8 << 10

func clip(s string) string {
	if len(s) <= maxSeedText {
		return s
	}
	s = s[:maxSeedText]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + " [clipped]"
}

func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(empty)"
	}
	return s
}

// showText is the OnText of a delegation routed to a peer: each piece of the
// remote task's streamed text is shown to the task's streaming clients as its
// distillate artifact growing (the first piece of a step starts it over, the
// later ones append), as a local tree's text is (TreeObserver.NodeText);
// nothing is stored, the result is written whole when the delegation ends.
func showText(s tasks.Shower, reqCtx *a2asrv.RequestContext) func(step int, text string) {
	var mu sync.Mutex
	last, seen := 0, false
	return func(step int, text string) {
		mu.Lock()
		appendTo := seen && last == step
		last, seen = step, true
		mu.Unlock()
		_ = s.Show(context.Background(), &a2a.TaskArtifactUpdateEvent{TaskID: reqCtx.TaskID, ContextID: reqCtx.ContextID, Append: appendTo,
			Artifact: &a2a.Artifact{ID: ArtifactID(reqCtx.TaskID), Name: "distillate", Parts: a2a.ContentParts{a2a.TextPart{Text: text}}}})
	}
}

// objectiveFrom reads a task's objective back from its first message, which
// the task store keeps (tasks.StoredMessage): the objective ReadInbound took
// from it when the task started.
func objectiveFrom(sm tasks.StoredMessage, reqMeta map[string]any) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		m, err := sm.FirstMessage(ctx)
		if err != nil {
			return "", err
		}
		in, err := ReadInbound(m, reqMeta)
		if err != nil {
			return "", fmt.Errorf("read the task's first message: %w", err)
		}
		return in.Objective, nil
	}
}
