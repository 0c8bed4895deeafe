package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/testkit"
)

func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLogHandler(t *testing.T) {
	testkit.RecordSpans(t)
	var buf bytes.Buffer
	log := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil))).With("run_id", "r1")
	ctx, span := Tracer().Start(context.Background(), "op")
	defer span.End()
	_, other := Tracer().Start(context.Background(), "other")
	defer other.End()
	sc, osc := span.SpanContext(), other.SpanContext()

	log.Info("no span")                  // nothing to add
	log.InfoContext(ctx, "from context") // the context's span
	tied := WithSpan(log, osc)
	tied.Info("fallback")                                                                       // the tied span
	tied.InfoContext(ctx, "context beats fallback")                                             // the context's span
	tied.With("agent_path", "0.1").Info("forwarded", "trace_id", "child-trace", "span_id", "c") // a child's own ids stay
	WithSpan(slog.New(slog.NewJSONHandler(&buf, nil)), osc).Info("plain handler")               // wrapped on demand

	lines := logLines(t, &buf)
	want := []struct{ trace, span string }{
		{"", ""},
		{sc.TraceID().String(), sc.SpanID().String()},
		{osc.TraceID().String(), osc.SpanID().String()},
		{sc.TraceID().String(), sc.SpanID().String()},
		{"child-trace", "c"},
		{osc.TraceID().String(), osc.SpanID().String()},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		l := lines[i]
		got, _ := l["trace_id"].(string)
		gotSpan, _ := l["span_id"].(string)
		if got != w.trace || gotSpan != w.span {
			t.Errorf("line %d (%s): trace_id %q span_id %q, want %q %q", i, l["msg"], got, gotSpan, w.trace, w.span)
		}
		if i < 5 && l["run_id"] != "r1" {
			t.Errorf("line %d lost run_id: %v", i, l)
		}
	}
	if n := strings.Count(buf.String(), `"trace_id"`); n != 5 {
		t.Errorf("%d trace_id keys, want 5 (never two on a line):\n%s", n, buf.String())
	}
	if WithSpan(log, sc.WithTraceID([16]byte{})) != log {
		t.Error("an invalid span context changed the logger")
	}
}
