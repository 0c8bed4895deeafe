package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// idProvider is the tracer provider of a process that exports no span
// (ExportNone): its spans have fresh ids under their parent's trace, sampled
// as the OTEL_TRACES_SAMPLER variables say (the flag peers and children get),
// and record nothing. The SDK's provider without an exporter recorded every
// span (its attributes, status and times, in a span no processor ever read):
// about 700 bytes of the supervisor's heap for each request's span and each
// subagent's spawn and delegation spans while the subagent lives (issue 35).
type idProvider struct {
	embedded.TracerProvider
	t *idTracer
}

// newIDProvider is an idProvider with the sampler environ's
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG say.
func newIDProvider(environ []string) *idProvider {
	return &idProvider{t: &idTracer{sampler: samplerFromEnviron(environ)}}
}

// Tracer returns the provider's tracer, the same for every name.
func (p *idProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return p.t }

type idTracer struct {
	embedded.Tracer
	sampler sdktrace.Sampler
}

// Start returns ctx with a new span context: its parent's trace (ctx's span,
// else a new trace), a new span id, sampled as the sampler decides. The span
// records nothing.
func (t *idTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	var psc trace.SpanContext
	if cfg.NewRoot() {
		ctx = trace.ContextWithSpanContext(ctx, psc)
	} else {
		psc = trace.SpanContextFromContext(ctx)
	}
	tid := psc.TraceID()
	if !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	res := t.sampler.ShouldSample(sdktrace.SamplingParameters{
		ParentContext: ctx, TraceID: tid, Name: name, Kind: cfg.SpanKind(), Attributes: cfg.Attributes(), Links: cfg.Links(),
	})
	flags := psc.TraceFlags() &^ trace.FlagsSampled
	if res.Decision == sdktrace.RecordAndSample {
		flags |= trace.FlagsSampled
	}
	ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: res.Tracestate,
	}))
	return ctx, trace.SpanFromContext(ctx)
}

// samplerFromEnviron is the sampler OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG in environ name, as the OpenTelemetry SDK reads
// them; unset, unknown or with a bad argument, the SDK's default
// (parentbased_always_on).
func samplerFromEnviron(environ []string) sdktrace.Sampler {
	var name, arg string
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "OTEL_TRACES_SAMPLER":
			name = strings.ToLower(strings.TrimSpace(v))
		case "OTEL_TRACES_SAMPLER_ARG":
			arg = strings.TrimSpace(v)
		}
	}
	ratio := func() (sdktrace.Sampler, bool) {
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1), true
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, false
		}
		return sdktrace.TraceIDRatioBased(r), true
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		if s, ok := ratio(); ok {
			return s
		}
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		if s, ok := ratio(); ok {
			return sdktrace.ParentBased(s)
		}
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}
