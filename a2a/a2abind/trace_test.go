package a2abind

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/internal/telemetry"
	"github.com/agentd/agentd/internal/testkit"
)

const (
	metaTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	metaSpan   = "00f067aa0ba902b7"
	metaParent = "00-" + metaTrace + "-" + metaSpan + "-01"
)

// The delegation span is a child of the request's span when there is one,
// else of the message's traceparent metadata; the delegation's payload names
// the delegation span as its parent.
func TestDelegationSpan(t *testing.T) {
	rec := testkit.RecordSpans(t)
	p := &a2atest.Provider{Result: a2atest.Echo}
	e, _ := newTestEngine(t, p, nil)

	a2atest.Send(t, e, withMeta(a2atest.Msg("from metadata"), map[string]any{MetaTrace: metaParent}))
	ctx, req := telemetry.Tracer().Start(context.Background(), "request")
	if _, err := e.OnSendMessage(ctx, withMeta(a2atest.Msg("from the request"), map[string]any{MetaTrace: metaParent})); err != nil {
		t.Fatal(err)
	}
	req.End()
	e.Wait(context.Background())

	var spans []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "agentd.delegate" {
			spans = append(spans, s)
		}
	}
	if len(spans) != 2 {
		t.Fatalf("%d delegation spans, want 2", len(spans))
	}
	wantParents := []trace.SpanContext{
		trace.SpanContextFromContext(telemetry.WithTraceparent(context.Background(), metaParent)),
		req.SpanContext(),
	}
	// The two spans may end in either order (the first send returns when its
	// task ends, not when its span does), so each request finds its span by the
	// span id its payload names.
	reqs := p.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d delegations, want 2", len(reqs))
	}
	for i, r := range reqs {
		tel := r.Payload.Telemetry
		var s sdktrace.ReadOnlySpan
		for _, c := range spans {
			if c.SpanContext().SpanID().String() == tel.ParentSpanID && c.SpanContext().TraceID().String() == tel.TraceID {
				s = c
			}
		}
		if s == nil {
			t.Errorf("delegation %d: payload telemetry %+v names no delegation span", i, tel)
			continue
		}
		if s.Parent().SpanID() != wantParents[i].SpanID() || s.SpanContext().TraceID() != wantParents[i].TraceID() {
			t.Errorf("delegation %d: parent %s in trace %s, want %s in %s", i, s.Parent().SpanID(), s.SpanContext().TraceID(), wantParents[i].SpanID(), wantParents[i].TraceID())
		}
		if s.Attributes()[0].Value.AsString() == "" {
			t.Errorf("delegation %d: no task id attribute", i)
		}
	}
}
