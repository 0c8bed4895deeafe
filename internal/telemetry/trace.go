package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span agentd starts.
const ScopeName = "github.com/agentd/agentd"

// Tracer returns agentd's tracer from the global tracer provider. Before Setup
// it is a no-op tracer whose spans carry the parent's span context through,
// so propagation still works. It is safe for concurrent use.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// The environment variables that decide whether spans are exported.
const (
	envOTLPPrefix     = "OTEL_EXPORTER_OTLP_"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envTracesExporter = "OTEL_TRACES_EXPORTER"
	envSDKDisabled    = "OTEL_SDK_DISABLED"
)

// Export says what Setup does with spans.
type Export int

// The export modes, from the environment.
const (
	// ExportNone gives spans ids (so trace ids reach logs and peers) but
	// records and sends nothing: no OTEL_EXPORTER_OTLP_* variable is set, or
	// OTEL_TRACES_EXPORTER is "none".
	ExportNone Export = iota
	// ExportOTLP sends spans over OTLP/HTTP as the OTEL_EXPORTER_OTLP_*
	// variables say.
	ExportOTLP
	// ExportDisabled installs a no-op provider: OTEL_SDK_DISABLED=true.
	ExportDisabled
)

func (e Export) String() string {
	switch e {
	case ExportOTLP:
		return "otlp"
	case ExportDisabled:
		return "disabled"
	}
	return "none"
}

// ExportFromEnv reads environ (KEY=VALUE entries, as os.Environ returns) and
// says whether and how spans are exported. It refuses settings agentd cannot
// honour, naming the variable: another traces exporter than otlp, or the gRPC
// OTLP protocol (agentd speaks OTLP over HTTP only).
func ExportFromEnv(environ []string) (Export, error) {
	env := make(map[string]string)
	otlp := false
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "OTEL_") {
			continue
		}
		env[k] = strings.TrimSpace(v)
		if strings.HasPrefix(k, envOTLPPrefix) && env[k] != "" && !otherSignal(k) {
			otlp = true
		}
	}
	if strings.EqualFold(env[envSDKDisabled], "true") {
		return ExportDisabled, nil
	}
	switch x := strings.ToLower(env[envTracesExporter]); x {
	case "", "otlp":
	case "none":
		return ExportNone, nil
	default:
		return ExportNone, fmt.Errorf("%s=%q: agentd exports traces only with otlp (or none)", envTracesExporter, env[envTracesExporter])
	}
	for _, k := range []string{envTracesProtocol, envProtocol} {
		switch p := env[k]; p {
		case "", "http/protobuf", "http/json":
			continue
		default:
			return ExportNone, fmt.Errorf("%s=%q: agentd exports OTLP over HTTP only (http/protobuf or http/json)", k, p)
		}
	}
	if otlp {
		return ExportOTLP, nil
	}
	return ExportNone, nil
}

// otherSignal reports whether an OTEL_EXPORTER_OTLP_ variable configures
// metrics or logs only, which says nothing about traces.
func otherSignal(k string) bool {
	return strings.HasPrefix(k, envOTLPPrefix+"METRICS_") || strings.HasPrefix(k, envOTLPPrefix+"LOGS_")
}

// Options configure Setup. The zero value is usable.
type Options struct {
	// ServiceName is the service.name resource attribute unless
	// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES set one; default "agentd".
	ServiceName string
	// Version is the service.version resource attribute, if set.
	Version string
	// Attributes are added to the resource (for example agentd.role).
	Attributes []attribute.KeyValue
	// Log receives OpenTelemetry's own errors (a failed export); nil leaves
	// OpenTelemetry's default handler.
	Log *slog.Logger
	// Environ is the environment to read; default os.Environ(). The exporter
	// itself reads the process environment for everything but its TLS
	// configuration.
	Environ []string
}

// Provider is the installed tracer provider. Its methods are safe for
// concurrent use; the zero value (nothing installed) does nothing.
type Provider struct {
	tp     *sdktrace.TracerProvider
	export Export
}

// Setup installs the global tracer provider and the W3C trace-context
// propagator, as the environment says (see ExportFromEnv): with an
// OTEL_EXPORTER_OTLP_* variable set, a batching OTLP/HTTP exporter configured
// by the standard variables, over TLS 1.3 at least when the endpoint is https
// (see otlpTLSConfig); without one, a provider whose spans record nothing
// but have ids, giving trace and span ids to logs and peers, sampled as
// OTEL_TRACES_SAMPLER says (idProvider: no exporter, no goroutine).
// Shutdown flushes and stops the exporter.
func Setup(ctx context.Context, o Options) (*Provider, error) {
	environ := o.Environ
	if environ == nil {
		environ = os.Environ()
	}
	mode, err := ExportFromEnv(environ)
	if err != nil {
		return nil, err
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if o.Log != nil {
		log := o.Log
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("opentelemetry", "err", err) }))
	}
	if mode == ExportDisabled {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return &Provider{export: mode}, nil
	}
	if mode == ExportNone {
		otel.SetTracerProvider(newIDProvider(environ))
		return &Provider{export: mode}, nil
	}
	tlsCfg, err := otlpTLSConfig(environ)
	if err != nil {
		return nil, err
	}
	var expOpts []otlptracehttp.Option
	if tlsCfg != nil {
		expOpts = append(expOpts, otlptracehttp.WithTLSClientConfig(tlsCfg))
	}
	exp, err := otlptracehttp.New(ctx, expOpts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res, err := newResource(ctx, o)
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return &Provider{tp: tp, export: mode}, nil
}

func newResource(ctx context.Context, o Options) (*resource.Resource, error) {
	name := o.ServiceName
	if name == "" {
		name = "agentd"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	attrs = append(attrs, o.Attributes...)
	// Later options win: the environment overrides the defaults above.
	res, err := resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(),
		resource.WithProcessPID(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// Export reports what the provider does with spans.
func (p *Provider) Export() Export {
	if p == nil {
		return ExportNone
	}
	return p.export
}

// ForceFlush exports every ended span now, within ctx.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p == nil || p.tp == nil {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}

// Shutdown flushes every ended span and stops the exporter, within ctx. Spans
// started after it are dropped.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.tp == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}
