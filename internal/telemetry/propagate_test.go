package telemetry

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

const (
	testTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpan   = "00f067aa0ba902b7"
	testParent = "00-" + testTrace + "-" + testSpan + "-01"
)

func TestTraceparentRoundTrip(t *testing.T) {
	ctx := WithTraceparent(context.Background(), testParent)
	if got := Traceparent(ctx); got != testParent {
		t.Fatalf("traceparent %q, want %q", got, testParent)
	}
	if got := Traceparent(context.Background()); got != "" {
		t.Fatalf("no span: traceparent %q, want none", got)
	}
	for _, bad := range []string{"", "garbage", "00-" + testTrace + "-0000000000000000-01", "00-00000000000000000000000000000000-" + testSpan + "-01"} {
		if sc := trace.SpanContextFromContext(WithTraceparent(context.Background(), bad)); sc.IsValid() {
			t.Errorf("%q: span context %v, want none", bad, sc)
		}
	}
}

// A span in process beats a trace context read off the wire.
func TestWithTraceparentKeepsLocalSpan(t *testing.T) {
	testkit.RecordSpans(t)
	ctx, span := Tracer().Start(context.Background(), "local")
	defer span.End()
	got := trace.SpanContextFromContext(WithTraceparent(ctx, testParent))
	if got.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("span %s, want the local %s", got.SpanID(), span.SpanContext().SpanID())
	}
	got = trace.SpanContextFromContext(FromTelemetry(ctx, api.Telemetry{Traceparent: testParent}))
	if got.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("FromTelemetry: span %s, want the local %s", got.SpanID(), span.SpanContext().SpanID())
	}
}

func TestTelemetryBlock(t *testing.T) {
	testkit.RecordSpans(t)
	// The ids alone are enough when a payload has no traceparent.
	ctx := FromTelemetry(context.Background(), api.Telemetry{TraceID: testTrace, ParentSpanID: testSpan})
	sc := trace.SpanContextFromContext(ctx)
	if sc.TraceID().String() != testTrace || sc.SpanID().String() != testSpan || !sc.IsRemote() {
		t.Fatalf("from ids: %v", sc)
	}
	if sc := trace.SpanContextFromContext(FromTelemetry(context.Background(), api.Telemetry{TraceID: "zz"})); sc.IsValid() {
		t.Fatalf("bad ids: %v, want none", sc)
	}
	ctx, span := Tracer().Start(FromTelemetry(context.Background(), api.Telemetry{Traceparent: testParent}), "spawn")
	defer span.End()
	var tel api.Telemetry
	SetTelemetry(ctx, &tel)
	if tel.TraceID != testTrace || tel.ParentSpanID != span.SpanContext().SpanID().String() || tel.Traceparent != Traceparent(ctx) {
		t.Fatalf("telemetry %+v for span %v", tel, span.SpanContext())
	}
	before := api.Telemetry{RunID: "r", Traceparent: "keep"}
	after := before
	SetTelemetry(context.Background(), &after)
	if after != before {
		t.Fatalf("no span changed the block: %+v", after)
	}
}

func TestHTTPHeaders(t *testing.T) {
	h := http.Header{}
	InjectHTTP(WithTraceparent(context.Background(), testParent), h)
	if got := h.Get("Traceparent"); got != testParent {
		t.Fatalf("header %q, want %q", got, testParent)
	}
	sc := trace.SpanContextFromContext(ExtractHTTP(context.Background(), h))
	if sc.TraceID().String() != testTrace || sc.SpanID().String() != testSpan {
		t.Fatalf("extracted %v", sc)
	}
	h = http.Header{}
	InjectHTTP(context.Background(), h)
	if len(h) != 0 {
		t.Fatalf("no span: headers %v, want none", h)
	}
}
