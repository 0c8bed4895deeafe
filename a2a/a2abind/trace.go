package a2abind

import (
	"context"

	"github.com/a2aproject/a2a-go/a2a"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/telemetry"
)

// The executor's side of a trace: the delegation span, one per task, a child
// of the request's server span, else of the traceparent in the message
// metadata. (The peer provider's client span is package peer's.)

// startDelegateSpan starts the span of one task's delegation. tp is the
// traceparent the message carried; a span already in ctx (the request's)
// beats it.
func startDelegateSpan(ctx context.Context, taskID a2a.TaskID, tp string) (context.Context, trace.Span) {
	ctx = telemetry.WithTraceparent(ctx, tp)
	return telemetry.Tracer().Start(ctx, "agentd.delegate", trace.WithAttributes(
		attribute.String("a2a.task_id", string(taskID)),
	))
}

// spanTurn records a finished turn on the delegation span.
func spanTurn(ctx context.Context, provider string, res api.SubagentResult) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return // it takes nothing: build nothing for it
	}
	span.SetAttributes(attribute.String("agentd.status", string(res.Status)))
	if provider != "" {
		span.SetAttributes(attribute.String("agentd.provider", provider))
	}
	if res.Status != api.StatusCompleted {
		span.SetStatus(codes.Error, string(res.Status)+": "+res.Detail)
	}
}

// spanRefused marks the delegation span of a refused task.
func spanRefused(ctx context.Context, state a2a.TaskState, text string) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String("a2a.task_state", string(state)))
	span.SetStatus(codes.Error, text)
}
