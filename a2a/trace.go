package a2a

import (
	"context"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/telemetry"
)

// The A2A side of a trace: the executor's delegation span (one per task, a
// child of the request's server span, else of the traceparent in the message
// metadata), and the peer provider's client span (one per delegation to a
// peer), whose traceparent goes out in every call's HTTP headers and in the
// message metadata.

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

// startPeerSpan starts the client span of one delegation to a peer; its parent
// is ctx's span (the supervisor's spawn span, or the executor's delegation
// span), else the payload's trace context.
func startPeerSpan(ctx context.Context, peer string, req *api.SpawnPayload) (context.Context, trace.Span) {
	ctx = telemetry.FromTelemetry(ctx, req.Telemetry)
	ctx, span := telemetry.Tracer().Start(ctx, "a2a.delegate "+peer, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("agentd.provider", peer),
		attribute.String("agentd.agent_path", req.AgentPath),
	))
	telemetry.SetTelemetry(ctx, &req.Telemetry)
	return ctx, span
}

// endPeerSpan ends a peer delegation's span with its result.
func endPeerSpan(span trace.Span, remote a2a.TaskID, res api.SubagentResult) {
	span.SetAttributes(attribute.String("agentd.status", string(res.Status)))
	if remote != "" {
		span.SetAttributes(attribute.String("a2a.remote_task_id", string(remote)))
	}
	if res.Status != api.StatusCompleted {
		span.SetStatus(codes.Error, string(res.Status)+": "+res.Detail)
	}
	span.End()
}

// traceInterceptor puts the traceparent of the call's context into the
// call's metadata, which the JSON-RPC transport sends as HTTP headers: the
// peer's server span becomes a child of this side's span.
type traceInterceptor struct {
	a2aclient.PassthroughInterceptor
}

// Before adds the traceparent header.
func (traceInterceptor) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	if tp := telemetry.Traceparent(ctx); tp != "" {
		req.Meta[telemetry.TraceparentKey] = []string{tp}
	}
	return ctx, nil
}
