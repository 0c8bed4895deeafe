package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// FuzzTraceparent: a traceparent read off the wire (a header, message
// metadata, a payload, a child's tool call) never panics; one that is taken
// yields a valid span context that writes back out as the same trace and
// span.
func FuzzTraceparent(f *testing.F) {
	f.Add(testParent)
	f.Add("00-" + testTrace + "-" + testSpan + "-00")
	f.Add("ff-" + testTrace + "-" + testSpan + "-01")
	f.Add("00-" + strings.ToUpper(testTrace) + "-" + testSpan + "-01")
	f.Add("")
	f.Fuzz(func(t *testing.T, tp string) {
		ctx := WithTraceparent(context.Background(), tp)
		sc := trace.SpanContextFromContext(ctx)
		if !sc.IsValid() {
			if Traceparent(ctx) != "" {
				t.Fatalf("%q: no span context, yet a traceparent out", tp)
			}
			return
		}
		out := Traceparent(ctx)
		back := trace.SpanContextFromContext(WithTraceparent(context.Background(), out))
		if back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() || back.TraceFlags() != sc.TraceFlags() {
			t.Fatalf("%q -> %q does not round-trip", tp, out)
		}
	})
}

// FuzzExportFromEnv: any environment gives a mode or an error naming an
// OTEL_ variable, never a panic.
func FuzzExportFromEnv(f *testing.F) {
	f.Add("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318\nOTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf")
	f.Add("OTEL_TRACES_EXPORTER=none")
	f.Add("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc")
	f.Add("OTEL_SDK_DISABLED=TRUE\nPATH=/bin")
	f.Add("=\n==\nOTEL_")
	f.Fuzz(func(t *testing.T, env string) {
		mode, err := ExportFromEnv(strings.Split(env, "\n"))
		if err != nil {
			if !strings.Contains(err.Error(), "OTEL_") {
				t.Fatalf("error %q names no variable", err)
			}
			return
		}
		if mode != ExportNone && mode != ExportOTLP && mode != ExportDisabled {
			t.Fatalf("mode %v", mode)
		}
	})
}
