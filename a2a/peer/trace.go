package peer

import (
	"context"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/telemetry"
)

// The peer's side of a trace: one client span per delegation to a peer,
// whose traceparent goes out in every call's HTTP headers and in the message
// metadata.

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

// traceHeader puts the traceparent of the call's context into the request's
// headers: the peer's server span becomes a child of this side's span.
func traceHeader(ctx context.Context, h http.Header) {
	if tp := telemetry.Traceparent(ctx); tp != "" {
		h.Set(telemetry.TraceparentKey, tp)
	}
}
