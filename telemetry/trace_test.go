package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/otlptest"
)

func TestExportFromEnv(t *testing.T) {
	cases := []struct {
		env     []string
		want    Export
		wantErr string
	}{
		{nil, ExportNone, ""},
		{[]string{"PATH=/bin", "OTEL_SERVICE_NAME=x"}, ExportNone, ""},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"}, ExportOTLP, ""},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://c:4318/v1/traces"}, ExportOTLP, ""},
		{[]string{"OTEL_EXPORTER_OTLP_HEADERS=a=b"}, ExportOTLP, ""}, // any OTLP variable turns export on
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT="}, ExportNone, ""},   // empty is unset
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c", "OTEL_TRACES_EXPORTER=none"}, ExportNone, ""},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c", "OTEL_TRACES_EXPORTER=otlp"}, ExportOTLP, ""},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c", "OTEL_SDK_DISABLED=true"}, ExportDisabled, ""},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c", "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"}, ExportOTLP, ""},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, ExportNone, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc"}, ExportNone, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{[]string{"OTEL_TRACES_EXPORTER=zipkin"}, ExportNone, "OTEL_TRACES_EXPORTER"},
	}
	for _, c := range cases {
		got, err := ExportFromEnv(c.env)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: err %v, want one naming %s", c.env, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: %v, %v; want %v", c.env, got, err, c.want)
		}
	}
}

// A provider set up from OTEL_EXPORTER_OTLP_ENDPOINT exports its spans over
// OTLP/HTTP (protobuf) with the service's resource; Shutdown flushes them.
func TestSetupExportsOverOTLP(t *testing.T) {
	rcv := otlptest.NewReceiver()
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	ctx := context.Background()
	tp, err := Setup(ctx, Options{Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Export() != ExportOTLP {
		t.Fatalf("export %v, want otlp", tp.Export())
	}
	ctx, parent := Tracer().Start(ctx, "parent")
	_, child := Tracer().Start(ctx, "child")
	child.End()
	parent.End()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tp.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) != 2 || len(rcv.Errs()) > 0 {
		t.Fatalf("received %v (errors %v), want 2 spans", spans, rcv.Errs())
	}
	if bad := otlptest.Tree(spans); len(bad) > 0 {
		t.Fatalf("not one tree: %v", bad)
	}
	for _, s := range spans {
		if s.Service != "agentd" || s.Attrs["resource.service.version"] != "1.2.3" || s.Attrs["resource.deployment.environment"] != "test" {
			t.Fatalf("resource of %s: %v", s.Name, s.Attrs)
		}
	}
}

// Without an OTLP variable nothing is exported, but spans are still recorded
// with fresh ids, so trace ids reach logs and peers.
func TestSetupWithoutExporterStillMintsIDs(t *testing.T) {
	tp, err := Setup(context.Background(), Options{Environ: []string{"PATH=/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Export() != ExportNone {
		t.Fatalf("export %v, want none", tp.Export())
	}
	_, span := Tracer().Start(context.Background(), "x")
	defer span.End()
	if !span.SpanContext().IsValid() || !span.IsRecording() {
		t.Fatalf("span context %v recording %v: want a valid, recorded span", span.SpanContext(), span.IsRecording())
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// OTEL_SDK_DISABLED installs a no-op provider: no ids of its own, an
	// incoming trace context passes through.
	if _, err := Setup(context.Background(), Options{Environ: []string{"OTEL_SDK_DISABLED=true"}}); err != nil {
		t.Fatal(err)
	}
	_, span = Tracer().Start(context.Background(), "y")
	if span.SpanContext().IsValid() {
		t.Fatalf("disabled: span context %v, want none", span.SpanContext())
	}
	in := WithTraceparent(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	_, span = Tracer().Start(in, "z")
	if got := span.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("disabled: trace id %s, want the incoming one", got)
	}
}

func TestSetupRefusesGRPC(t *testing.T) {
	_, err := Setup(context.Background(), Options{Environ: []string{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Fatalf("err %v, want one naming OTEL_EXPORTER_OTLP_PROTOCOL", err)
	}
}

// recordSpans installs a recording provider for one test and returns its
// recorder.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec
}

func spanByName(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range rec.Ended() {
		if s.Name() == name {
			return s
		}
	}
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	t.Fatalf("no span %q among %v", name, names)
	return nil
}

var _ trace.Tracer = Tracer()
