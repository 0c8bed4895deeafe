package telemetry

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/otlptest"
	"github.com/agentd/agentd/internal/testkit"
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
		{[]string{"OTEL_EXPORTER_OTLP_HEADERS=a=b"}, ExportOTLP, ""},                                                                      // any OTLP variable turns export on
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT="}, ExportNone, ""},                                                                        // empty is unset
		{[]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=http://c:4318/v1/metrics", "OTEL_EXPORTER_OTLP_LOGS_HEADERS=a=b"}, ExportNone, ""}, // other signals' settings
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

// Without an OTLP variable nothing is exported, but spans still get fresh
// ids, so trace ids reach logs and peers; they record nothing (issue 35: a
// recorded span no processor reads held about 700 bytes while it lived).
func TestSetupWithoutExporterStillMintsIDs(t *testing.T) {
	tp, err := Setup(context.Background(), Options{Environ: []string{"PATH=/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if tp.Export() != ExportNone {
		t.Fatalf("export %v, want none", tp.Export())
	}
	ctx, span := Tracer().Start(context.Background(), "x")
	defer span.End()
	if !span.SpanContext().IsValid() || span.IsRecording() || !span.SpanContext().IsSampled() {
		t.Fatalf("span context %v recording %v: want a valid, sampled span that records nothing", span.SpanContext(), span.IsRecording())
	}
	_, child := Tracer().Start(ctx, "child")
	if child.SpanContext().TraceID() != span.SpanContext().TraceID() || child.SpanContext().SpanID() == span.SpanContext().SpanID() || !child.SpanContext().IsValid() {
		t.Fatalf("child %v of %v: want the same trace, a span of its own", child.SpanContext(), span.SpanContext())
	}
	if got := Traceparent(ctx); got != "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()+"-01" {
		t.Fatalf("traceparent for peers %q", got)
	}
	for _, c := range []struct{ parent, flags string }{{"01", "01"}, {"00", "00"}} {
		in := WithTraceparent(context.Background(), "00-"+testTrace+"-"+testSpan+"-"+c.parent)
		_, s := Tracer().Start(in, "under a caller")
		if got := Traceparent(trace.ContextWithSpan(context.Background(), s)); !strings.HasPrefix(got, "00-"+testTrace+"-") || strings.Contains(got, testSpan) || !strings.HasSuffix(got, "-"+c.flags) {
			t.Errorf("under a caller's %s: traceparent %q, want its trace, a new span, flags %s", c.parent, got, c.flags)
		}
	}
	if !raceEnabled {
		if n := testing.AllocsPerRun(100, func() { Tracer().Start(ctx, "child") }); n > 3 {
			t.Errorf("a span without an exporter: %v allocations, want at most 3", n)
		}
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

// Over https the exporter trusts OTEL_EXPORTER_OTLP_CERTIFICATE and speaks
// TLS 1.3 at least: a collector that offers only TLS 1.2 receives nothing.
func TestSetupExportsOverTLS13Only(t *testing.T) {
	for _, tc := range []struct {
		max  uint16
		want int
	}{{tls.VersionTLS13, 1}, {tls.VersionTLS12, 0}} {
		rcv := otlptest.NewTLSReceiver(&tls.Config{MaxVersion: tc.max})
		ca := filepath.Join(t.TempDir(), "collector-ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rcv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_EXPORTER_OTLP_CERTIFICATE=" + ca}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		// The error handler Setup installs stays global after the test: the
		// log it writes to must be safe for concurrent use.
		var logs testkit.Buffer
		tp, err := Setup(context.Background(), Options{Environ: env, Log: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		_, span := Tracer().Start(context.Background(), "over tls")
		span.End()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = tp.Shutdown(ctx) // flushes; a failed export goes to the error handler
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got := len(rcv.Spans()); got != tc.want {
			t.Errorf("collector with TLS max %x: %d spans, want %d; log:\n%s", tc.max, got, tc.want, logs.String())
		}
		if tc.want == 0 && !strings.Contains(logs.String(), "protocol version") {
			t.Errorf("collector with TLS max %x: the failed export is not logged:\n%s", tc.max, logs.String())
		}
		rcv.Close()
	}
}

func TestOTLPTLSConfig(t *testing.T) {
	for _, env := range [][]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=https://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=HTTP://c:4318/v1/traces"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=https://c:4318", "OTEL_EXPORTER_OTLP_INSECURE=true"},
		{"OTEL_EXPORTER_OTLP_INSECURE=false", "OTEL_EXPORTER_OTLP_TRACES_INSECURE=TRUE"},
	} {
		if cfg, err := otlpTLSConfig(env); cfg != nil || err != nil {
			t.Errorf("%v: %+v, %v; want plain http (no TLS config)", env, cfg, err)
		}
	}
	for _, env := range [][]string{
		nil, // the default endpoint is https://localhost:4318
		{"OTEL_EXPORTER_OTLP_ENDPOINT=https://c:4318"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4318", "OTEL_EXPORTER_OTLP_INSECURE=false"},
	} {
		if cfg, err := otlpTLSConfig(env); err != nil || cfg == nil || cfg.MinVersion != tls.VersionTLS13 {
			t.Errorf("%v: %+v, %v; want TLS 1.3 at least", env, cfg, err)
		}
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, env := range [][]string{
		{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE=" + missing},
		{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE=" + missing, "OTEL_EXPORTER_OTLP_CLIENT_KEY=" + missing},
	} {
		k, _, _ := strings.Cut(env[0], "=")
		if _, err := otlpTLSConfig(env); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%v: %v, want an error naming %s", env, err, k)
		}
	}
}

func TestSetupRefusesGRPC(t *testing.T) {
	_, err := Setup(context.Background(), Options{Environ: []string{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}})
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Fatalf("err %v, want one naming OTEL_EXPORTER_OTLP_PROTOCOL", err)
	}
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

// Without an exporter the sampled flag children and peers get is still the
// OTEL_TRACES_SAMPLER variables' (as the OpenTelemetry SDK reads them; a bad
// one is its default, parentbased_always_on).
func TestSetupWithoutExporterSamples(t *testing.T) {
	for _, c := range []struct {
		env     []string
		sampled bool
	}{
		{[]string{"PATH=/bin"}, true},
		{[]string{"OTEL_TRACES_SAMPLER=always_off"}, false},
		{[]string{"OTEL_TRACES_SAMPLER=parentbased_always_off"}, false},
		{[]string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0"}, false},
		{[]string{"OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=1"}, true},
		{[]string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=2"}, true},
		{[]string{"OTEL_TRACES_SAMPLER=jaeger_remote"}, true},
		{[]string{"OTEL_TRACES_SAMPLER=ALWAYS_ON"}, true},
	} {
		if _, err := Setup(context.Background(), Options{Environ: c.env}); err != nil {
			t.Fatal(err)
		}
		_, s := Tracer().Start(context.Background(), "root")
		if !s.SpanContext().IsValid() || s.SpanContext().IsSampled() != c.sampled {
			t.Errorf("%v: span context %v, want valid, sampled %v", c.env, s.SpanContext(), c.sampled)
		}
	}
}
