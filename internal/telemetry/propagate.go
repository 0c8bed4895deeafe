package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
)

// w3c is the W3C trace-context propagator: the traceparent (and tracestate)
// fields, whatever global propagator is installed.
var w3c propagation.TraceContext

// TraceparentKey is the W3C header, payload and metadata field name.
const TraceparentKey = "traceparent"

// Traceparent returns the W3C traceparent of ctx's span, or "" when ctx holds
// no valid span context.
func Traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return c[TraceparentKey]
}

// WithTraceparent returns ctx carrying the remote span context that tp names,
// so spans started from it join that trace. ctx is returned unchanged when it
// already holds a valid span context (a span in process beats a context read
// off the wire) or when tp does not parse.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{TraceparentKey: tp})
}

// FromTelemetry returns ctx carrying the trace context of a spawn payload's
// Telemetry block: its traceparent, else its trace_id and parent_span_id.
// As with WithTraceparent, a valid span context already in ctx wins.
func FromTelemetry(ctx context.Context, t api.Telemetry) context.Context {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	if t.Traceparent != "" {
		return WithTraceparent(ctx, t.Traceparent)
	}
	tid, err1 := trace.TraceIDFromHex(t.TraceID)
	sid, err2 := trace.SpanIDFromHex(t.ParentSpanID)
	if err1 != nil || err2 != nil {
		return ctx
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// SetTelemetry writes the trace context of ctx's span into a payload's
// Telemetry block: the traceparent, the trace id, and the span's id as the
// parent_span_id of whatever the payload's receiver starts. Without a valid
// span context in ctx, t is left as it is.
func SetTelemetry(ctx context.Context, t *api.Telemetry) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	t.Traceparent = Traceparent(ctx)
	t.TraceID = sc.TraceID().String()
	t.ParentSpanID = sc.SpanID().String()
}

// InjectHTTP sets the traceparent (and tracestate) headers of h from ctx's
// span; without one, h is left as it is.
func InjectHTTP(ctx context.Context, h http.Header) {
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}

// ExtractHTTP returns ctx carrying the remote span context of h's traceparent
// header, if it has a valid one.
func ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	if len(h["Traceparent"]) == 0 {
		// No traceparent, which the propagator reads first (it looks for
		// it under this key, canonicalizing its own name anew each time).
		return ctx
	}
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}
