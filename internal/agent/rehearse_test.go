package agent

import (
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentd/agentd/api"
)

// The rehearsal a warm child runs before its payload is not work: it records
// no span (a pooled child's rehearsal once showed up as a stray root span in
// the trace of the run it was later given).
func TestRehearsalRecordsNoSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	if res := rehearse(); res.Status != api.StatusCompleted {
		t.Fatalf("rehearsal ended %s: %s", res.Status, res.Detail)
	}
	if n := len(rec.Ended()) + len(rec.Started()); n != 0 {
		t.Fatalf("the rehearsal recorded %d spans, want none", n)
	}
}
