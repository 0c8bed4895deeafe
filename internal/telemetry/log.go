package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The log keys of the trace context.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogHandler wraps an slog.Handler and adds trace_id and span_id to every
// record: those of the span in the record's context, else those of the
// handler's fallback span (see WithSpan), else none. A record that already
// carries a trace_id (a child's forwarded log line) keeps its own. It is safe
// for concurrent use when the wrapped handler is.
type LogHandler struct {
	inner    slog.Handler
	fallback trace.SpanContext
}

// NewLogHandler wraps h.
func NewLogHandler(h slog.Handler) *LogHandler {
	if lh, ok := h.(*LogHandler); ok {
		return lh
	}
	return &LogHandler{inner: h}
}

// Enabled reports whether the wrapped handler handles level.
func (h *LogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// Handle adds the trace context and passes the record on.
func (h *LogHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		sc = h.fallback
	}
	if sc.IsValid() && !hasAttr(r, LogTraceID) {
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs returns a LogHandler over the wrapped handler's WithAttrs.
func (h *LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &LogHandler{inner: h.inner.WithAttrs(attrs), fallback: h.fallback}
}

// WithGroup returns a LogHandler over the wrapped handler's WithGroup. Its
// records' trace_id and span_id land inside the group, as every attribute of
// a record does; agentd's own loggers open no group.
func (h *LogHandler) WithGroup(name string) slog.Handler {
	return &LogHandler{inner: h.inner.WithGroup(name), fallback: h.fallback}
}

func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}

// WithSpan returns a logger whose records without a span in their context
// carry sc's trace_id and span_id: the logger of one subagent's supervision, or
// of a child's whole run. An invalid sc returns log unchanged.
func WithSpan(log *slog.Logger, sc trace.SpanContext) *slog.Logger {
	if !sc.IsValid() || log == nil {
		return log
	}
	h := log.Handler()
	if lh, ok := h.(*LogHandler); ok {
		h = lh.inner
	}
	return slog.New(&LogHandler{inner: h, fallback: sc})
}
