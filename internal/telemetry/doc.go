// Package telemetry is agentd's observability plumbing: the OpenTelemetry
// tracer provider (OTLP over HTTP, configured by the standard OTEL_* variables),
// W3C trace-context propagation through the spawn payload, HTTP headers and A2A
// message metadata, an slog handler that stamps trace_id and span_id on every
// log line, and the Prometheus registry with agentd's metric definitions.
//
// One trace spans a whole delegation: the A2A request span (server side), the
// executor's delegation span, the supervisor's spawn span for every subagent,
// each child's run span with its model and tool call spans (exported by the
// child itself), and across the mesh through the traceparent a peer call
// carries. Packages start spans with Tracer, which reads the global provider
// that Setup installs; before Setup (and in tests that do not call it) spans
// are no-ops that still pass an incoming trace context through.
//
// Nothing here does work at package init: a subagent process that exports
// nothing pays for no exporter.
package telemetry
