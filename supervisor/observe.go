package supervisor

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/telemetry"
)

// This file holds the supervisor's share of observability: the spawn span of
// every subagent (from its admission to its reap), the span of each tool call
// it serves, the bounded reason of a spawn refusal, and the heartbeat behind
// /healthz.

// startSpawnSpan starts the span of one subagent's supervised life. Its parent
// is ctx's span (the executor's delegation, or the tool call that asked for a
// nested spawn), else the trace context of the payload. The payload's
// Telemetry block is pointed at the new span, so the child's own spans (and a
// peer's, for a remote child) are its children.
func startSpawnSpan(ctx context.Context, p *api.SpawnPayload, provider string) trace.Span {
	ctx = telemetry.FromTelemetry(ctx, p.Telemetry)
	ctx, span := telemetry.Tracer().Start(ctx, "agentd.spawn", trace.WithAttributes(
		attribute.String("agentd.run_id", p.Telemetry.RunID),
		attribute.String("agentd.agent_path", p.AgentPath),
		attribute.Int("agentd.depth", p.Depth),
		attribute.String("agentd.provider", provider),
	))
	telemetry.SetTelemetry(ctx, &p.Telemetry)
	return span
}

// endSpawnSpan ends n's spawn span with its final result; a detail that
// quotes a model (a refusal, a schema mismatch) only with log content on.
func endSpawnSpan(n *node, res api.SubagentResult) {
	span := n.span
	if span == nil {
		return
	}
	span.SetAttributes(
		attribute.String("agentd.status", string(res.Status)),
		attribute.Int64("agentd.tokens_in", res.Usage.TokensIn),
		attribute.Int64("agentd.tokens_out", res.Usage.TokensOut),
		attribute.Int("agentd.steps", res.Usage.Steps),
	)
	if res.Cause != "" {
		span.SetAttributes(attribute.String("agentd.cause", res.Cause))
	}
	if res.Status != api.StatusCompleted {
		span.SetStatus(codes.Error, telemetry.ResultDescription(res, n.payload.Telemetry.LogContent))
	}
	span.End()
}

// nodeLogger is the logger of n's supervision: its run_id, agent_path and
// task_id, and the trace_id and span_id of its spawn span.
//
// Its attributes are kept as given (the payload's and the node's own strings,
// no copies) and formatted only when a line is written (attrsHandler): a
// logger made with With formats them at once into a copy of the handler (a
// JSON handler's clone and its preformatted buffer, twice per node with the
// pid's), about 900 bytes of the supervisor's heap per live child (issue 35)
// for the few lines a node writes.
func (s *Supervisor) nodeLogger(n *node) *slog.Logger {
	log := slog.New(&attrsHandler{inner: s.log.Handler(), attrs: []slog.Attr{
		slog.String("run_id", n.payload.Telemetry.RunID),
		slog.String("agent_path", n.payload.AgentPath),
		slog.String("task_id", n.handle),
	}})
	if n.span != nil {
		log = telemetry.WithSpan(log, n.span.SpanContext())
	}
	return log
}

// spanCtx is a context holding n's spawn span, for log lines about n written
// with the supervisor's own logger (they get its trace_id and span_id).
func (n *node) spanCtx() context.Context {
	if n.span == nil {
		return context.Background()
	}
	return trace.ContextWithSpan(context.Background(), n.span)
}

// startToolSpan starts the supervisor's span of one tool call, a child of the
// calling child's own tool span (its traceparent travels in the call), else of
// the caller's spawn span.
func startToolSpan(n *node, call api.ToolCall) (context.Context, trace.Span) {
	ctx := context.Background()
	if n.span != nil {
		ctx = trace.ContextWithSpan(ctx, n.span)
	}
	if call.Traceparent != "" {
		// The child's span is more precise than the node's.
		ctx = telemetry.WithTraceparent(context.Background(), call.Traceparent)
		if !trace.SpanContextFromContext(ctx).IsValid() && n.span != nil {
			ctx = trace.ContextWithSpan(context.Background(), n.span)
		}
	}
	return telemetry.Tracer().Start(ctx, "tool/call "+call.Tool, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("gen_ai.tool.name", call.Tool), attribute.String("agentd.agent_path", n.payload.AgentPath)))
}

// endToolSpan ends a tool call's span with its result.
func endToolSpan(span trace.Span, res api.ToolResult) {
	if res.IsError {
		span.SetStatus(codes.Error, "tool result is an error")
	}
	span.End()
}

// Refusal reasons, the bounded label of the spawn refusal metric.
const (
	ReasonDraining         = "draining"
	ReasonMaxDepth         = "max_depth"
	ReasonMaxChildren      = "max_children"
	ReasonMaxInflight      = "max_inflight"
	ReasonMaxTotal         = "max_total_subagents"
	ReasonSpawnRate        = "spawn_rate"
	ReasonTokenCeiling     = "tree_token_ceiling"
	ReasonMissingObjective = "missing_objective"
	ReasonScopeWidens      = "scope_widens"
	ReasonRuleOfTwo        = "rule_of_two"
	ReasonGrantExhausted   = "grant_exhausted"
	ReasonDeadlinePassed   = "deadline_passed"
	ReasonUnknownProvider  = "unknown_provider"
	ReasonServiceCapacity  = "service_capacity"
	ReasonBadArguments     = "bad_arguments"
	ReasonInvalid          = "invalid"
	ReasonExecOff          = "exec_off"         // the exec self-tool is not allowed
	ReasonExecNotGranted   = "exec_not_granted" // the caller's scope does not hold subagent/exec
)

// RefusalReasons lists every refusal reason, in the order of the chokepoint's
// checks; Stats reports each (zero until it happens).
var RefusalReasons = []string{
	ReasonBadArguments, ReasonDraining, ReasonMaxDepth, ReasonMaxChildren, ReasonMaxInflight, ReasonMaxTotal,
	ReasonSpawnRate, ReasonTokenCeiling, ReasonMissingObjective, ReasonScopeWidens, ReasonRuleOfTwo,
	ReasonGrantExhausted, ReasonDeadlinePassed, ReasonUnknownProvider, ReasonServiceCapacity, ReasonInvalid,
	ReasonExecOff, ReasonExecNotGranted,
}

// refusalReason maps a refusal text of the chokepoint to its reason. Texts
// that name something variable (a depth, a tool) are matched by prefix; any
// other "spawn denied: ..." (a contract, seed or payload that does not
// validate) is ReasonInvalid. The exec self-tool's refusals of the same caps
// ("exec denied: ...") count under the same reasons.
func refusalReason(text string) string {
	switch {
	case text == refuseExecOff:
		return ReasonExecOff
	case text == refuseExecNotGranted:
		return ReasonExecNotGranted
	case strings.HasPrefix(text, refuseExecBadArgs):
		return ReasonBadArguments
	}
	if rest, ok := strings.CutPrefix(text, "exec denied: "); ok {
		text = "spawn denied: " + rest
	}
	switch text {
	case refuseDraining:
		return ReasonDraining
	case refuseChildCap:
		return ReasonMaxChildren
	case refuseTreeCap:
		return ReasonMaxTotal
	case refuseRate:
		return ReasonSpawnRate
	case refuseCeiling:
		return ReasonTokenCeiling
	case refuseTrifecta:
		return ReasonRuleOfTwo
	case refuseGrantExhausted:
		return ReasonGrantExhausted
	case refuseDeadlinePassed:
		return ReasonDeadlinePassed
	case refuseCapacity:
		return ReasonServiceCapacity
	case api.ErrMissingObjective.Error():
		return ReasonMissingObjective
	}
	for _, p := range []struct{ prefix, reason string }{
		{refuseScopeWidens, ReasonScopeWidens},
		{"spawn denied: max_depth ", ReasonMaxDepth},
		{"spawn denied: max_inflight ", ReasonMaxInflight},
		{refuseUnknownProvider, ReasonUnknownProvider},
		{refuseBadArguments, ReasonBadArguments},
		{refuseUnknownAgentType, ReasonBadArguments},
		{refusePeerNotAllowed, ReasonUnknownProvider},
	} {
		if strings.HasPrefix(text, p.prefix) {
			return p.reason
		}
	}
	return ReasonInvalid
}

// Refusal texts matched by prefix.
const (
	refuseUnknownProvider = "spawn denied: unknown provider "
	refuseBadArguments    = "spawn denied: bad arguments: "
	// refuseUnknownAgentType: the spawn names an agent type the agents
	// file does not declare.
	refuseUnknownAgentType = "spawn denied: unknown agent type "
	// refusePeerNotAllowed: the parent's agent type may not delegate to
	// the provider the spawn names.
	refusePeerNotAllowed = "spawn denied: the agent type may not use provider "
)

// heartbeat is the supervisor's own liveness: a goroutine that, every
// interval, takes the locks that every spawn, reap and kill passes through and
// stamps the time. A stuck child holds none of them, so it never stops the
// heartbeat; a wedged supervisor does.
type heartbeat struct {
	interval atomic.Int64 // nanoseconds; 0 until Heartbeat runs
	last     atomic.Int64 // unix nanoseconds of the latest beat
}

// HeartbeatStale is how many intervals the heartbeat may miss before Healthy
// reports false.
const HeartbeatStale = 10

// Heartbeat beats every interval until ctx ends; run it on its own goroutine.
// Each beat takes the supervisor's node lock and the reaper's lock, then
// records the time that Healthy and LastHeartbeat read.
func (s *Supervisor) Heartbeat(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	beat := func() {
		s.mu.Lock()
		_ = len(s.nodes)
		s.mu.Unlock()
		theReaper.mu.Lock()
		_ = len(theReaper.waiters)
		theReaper.mu.Unlock()
		s.hb.last.Store(time.Now().UnixNano())
	}
	beat()
	s.hb.interval.Store(int64(interval))
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			beat()
		}
	}
}

// LastHeartbeat returns the time of the latest heartbeat; zero before
// Heartbeat runs.
func (s *Supervisor) LastHeartbeat() time.Time {
	ns := s.hb.last.Load()
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Healthy reports whether the supervisor's heartbeat is recent: at most
// HeartbeatStale intervals old. Without a running Heartbeat it reports true.
func (s *Supervisor) Healthy() bool {
	iv := s.hb.interval.Load()
	if iv == 0 {
		return true
	}
	return time.Since(s.LastHeartbeat()) <= time.Duration(HeartbeatStale*iv)
}

// refused counts a refusal of the chokepoint by its reason, marks the span of
// the tool call that asked, and returns the refusal as the tool result.
func (s *Supervisor) refused(ctx context.Context, text string) api.ToolResult {
	reason := refusalReason(text)
	s.stats.refusal(reason)
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String("agentd.refusal", reason))
	span.SetStatus(codes.Error, text)
	return api.TextResult(text, true)
}

// admitted starts the spawn span of a nested child the chokepoint admitted
// (ctx holds the span of the parent's tool call) and counts a local spawn or
// an exec child; a remote child is counted by its provider.
func (s *Supervisor) admitted(ctx context.Context, child *node) {
	// The child is already in the tree, where info() reads its payload under
	// its lock; nothing else reads its Telemetry block before it runs.
	child.mu.Lock()
	child.span = startSpawnSpan(ctx, &child.payload, child.nest.provider)
	child.mu.Unlock()
	switch {
	case child.nest.exec != nil:
		child.span.SetAttributes(attribute.String("agentd.kind", KindExec))
		s.stats.execs.Add(1)
	case !child.nest.remote:
		s.stats.spawn(localProvider)
	}
}

// text hands a text event of n's child to the Observer, if it hears text
// (TextObserver). It changes nothing of the node: a text event's usage, if
// any, is not counted.
func (s *Supervisor) text(n *node, ev api.LoopEvent) {
	if ev.Text == "" {
		return
	}
	if o, ok := s.cfg.Observer.(TextObserver); ok {
		o.NodeText(n.info(), ev.Step, ev.Text)
	}
}

// remoteTextKey is the context key of a remote child's text function.
type remoteTextKey struct{}

// withRemoteText returns ctx carrying fn, the function a remote child's
// streamed text goes to.
func withRemoteText(ctx context.Context, fn func(step int, text string)) context.Context {
	return context.WithValue(ctx, remoteTextKey{}, fn)
}

// RemoteText returns the function a Delegator hands the text of the remote
// child it was asked to start (the ctx of Delegator.Delegate) to, as the peer
// streams it: step counts the pieces that start the text over (a new model
// step), text is one piece. It shows the text where a local child's goes
// (TextObserver), never in the parent's context; it may block until the
// Observer heard the child start. Nil when ctx carries none.
func RemoteText(ctx context.Context) func(step int, text string) {
	fn, _ := ctx.Value(remoteTextKey{}).(func(step int, text string))
	return fn
}

// attrsHandler is inner with attrs added to every record, as
// inner.WithAttrs(attrs) would add them (the same lines, field for field),
// kept unformatted until a record is handled: WithAttrs adds to the list
// without formatting, WithGroup formats them (a group needs them before it).
type attrsHandler struct {
	inner slog.Handler
	attrs []slog.Attr
}

// Enabled reports whether inner handles level.
func (h *attrsHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle writes r through inner with h's attributes.
func (h *attrsHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.inner.WithAttrs(h.attrs).Handle(ctx, r)
}

// WithAttrs returns h with attrs after its own, still unformatted.
func (h *attrsHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	all := make([]slog.Attr, 0, len(h.attrs)+len(attrs))
	return &attrsHandler{inner: h.inner, attrs: append(append(all, h.attrs...), attrs...)}
}

// WithGroup returns inner with h's attributes and the group opened after them.
func (h *attrsHandler) WithGroup(name string) slog.Handler {
	return h.inner.WithAttrs(h.attrs).WithGroup(name)
}
