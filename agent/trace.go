package agent

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/telemetry"
)

// The child's spans: one for its whole run, parented by the traceparent in its
// payload (the supervisor's spawn span), and one per model call and per tool
// call inside it. The child exports them itself, through the OTEL_* variables
// the supervisor passes on, and flushes them before its result frame.

// startRunSpan starts the span of the child's run.
func startRunSpan(ctx context.Context, p *api.SpawnPayload) (context.Context, trace.Span) {
	ctx = telemetry.FromTelemetry(ctx, p.Telemetry)
	return telemetry.Tracer().Start(ctx, "agentd.run", trace.WithAttributes(
		attribute.String("agentd.run_id", p.Telemetry.RunID),
		attribute.String("agentd.agent_path", p.AgentPath),
		attribute.Int("agentd.depth", p.Depth),
	))
}

// endRunSpan ends the run's span with its result.
func endRunSpan(span trace.Span, res api.SubagentResult) {
	span.SetAttributes(
		attribute.String("agentd.status", string(res.Status)),
		attribute.Int("agentd.steps", res.Usage.Steps),
		attribute.Int64("gen_ai.usage.input_tokens", res.Usage.TokensIn),
		attribute.Int64("gen_ai.usage.output_tokens", res.Usage.TokensOut),
	)
	if res.Status != api.StatusCompleted {
		span.SetStatus(codes.Error, string(res.Status)+": "+res.Detail)
	}
	span.End()
}

// startModelSpan starts the span of one model call (an OpenTelemetry GenAI
// "chat" span).
func startModelSpan(ctx context.Context, p *api.SpawnPayload, step int) (context.Context, trace.Span) {
	model := p.Intelligence.Model
	if model == "" {
		model, _, _ = strings.Cut(p.Intelligence.Endpoint, "=")
	}
	return telemetry.Tracer().Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", model),
		attribute.Int("agentd.step", step),
	))
}

// endModelSpan ends a model call's span with its usage and finish reason.
func endModelSpan(span trace.Span, resp *Response, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else if resp != nil {
		span.SetAttributes(
			attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.TokensIn),
			attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.TokensOut),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{string(resp.Finish)}),
		)
	}
	span.End()
}

// startToolSpan starts the span of one tool call ("execute_tool"); its
// traceparent rides in the tool/call frame, so the supervisor's side of the
// call is its child.
func startToolSpan(ctx context.Context, wire string) (context.Context, trace.Span) {
	return telemetry.Tracer().Start(ctx, "execute_tool "+wire, trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", wire),
	))
}

// endToolSpan ends a tool call's span.
func endToolSpan(span trace.Span, out api.ToolResult, err error) {
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case out.IsError:
		span.SetStatus(codes.Error, "tool result is an error")
	}
	span.End()
}

// Flush budgets: how long a child waits for its spans to reach the collector
// before its result frame. A run that ended at its deadline or by a cancel has
// the kill ladder's grace, not more.
const (
	maxFlush = time.Second
	minFlush = 100 * time.Millisecond
)

// flushSpans exports the run's spans before the result frame, bounded by what
// is left of the deadline (between minFlush and maxFlush).
func flushSpans(tp *telemetry.Provider, deadline time.Time, log *slog.Logger) {
	if tp.Export() != telemetry.ExportOTLP {
		return
	}
	budget := min(time.Until(deadline), maxFlush)
	budget = max(budget, minFlush)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("spans not flushed", "err", err)
	}
}
