package supervisor

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/telemetry"
)

// nodeLogTestSpan is a valid span context for the node loggers' tests.
func nodeLogTestSpan() trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	})
}

// nodeLogTestNode is a node with a run, a path and a span context's span.
func nodeLogTestNode() *node {
	pl := testPayload("task-1", time.Minute)
	pl.AgentPath, pl.Telemetry.RunID = "root/worker", "run-1"
	n := newNode("task-1", nil, pl)
	n.span = trace.SpanFromContext(trace.ContextWithSpanContext(context.Background(), nodeLogTestSpan()))
	return n
}

// TestNodeLoggerLines: a node's logger writes the lines a logger made with
// With writes, field for field (run_id, agent_path, task_id, the pid added
// after, the record's own, trace_id and span_id), groups included.
func TestNodeLoggerLines(t *testing.T) {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	var got, want bytes.Buffer
	s := &Supervisor{log: slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(&got, &slog.HandlerOptions{ReplaceAttr: noTime})))}
	base := slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(&want, &slog.HandlerOptions{ReplaceAttr: noTime})))
	n := nodeLogTestNode()

	log := s.nodeLogger(n)
	ref := telemetry.WithSpan(base.With("run_id", "run-1", "agent_path", "root/worker", "task_id", "task-1"), nodeLogTestSpan())
	for _, l := range []struct{ got, want *slog.Logger }{
		{log, ref},
		{log.With("pid", 42), ref.With("pid", 42)},
		{log.With("pid", 42).With("stream", "stderr"), ref.With("pid", 42).With("stream", "stderr")},
		{log.With("pid", 42).WithGroup("g").With("k", 1), ref.With("pid", 42).WithGroup("g").With("k", 1)},
	} {
		l.got.Info("child exited", "code", 0, "detail", "ok")
		l.want.Info("child exited", "code", 0, "detail", "ok")
		l.got.Debug("not written")
		l.want.Debug("not written")
	}
	if got.String() != want.String() {
		t.Fatalf("node logger wrote\n%s\nwant (With's)\n%s", got.String(), want.String())
	}
	if !bytes.Contains(got.Bytes(), []byte(`"task_id":"task-1","pid":42,"code":0`)) {
		t.Fatalf("lines without the node's fields:\n%s", got.String())
	}
}

// TestNodeLoggerHeap: a node's logger (and the one with its pid that
// startCold makes, which the node's supervision keeps while its child lives)
// holds few bytes of the supervisor's heap: its attributes unformatted, not a
// JSON handler's copy with them preformatted, twice (issue 35).
func TestNodeLoggerHeap(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's allocations are not the build's")
	}
	s := &Supervisor{log: slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(&bytes.Buffer{}, nil)))}
	n := nodeLogTestNode()
	const runs = 200
	keep := make([]*slog.Logger, 0, 2*runs)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		log := s.nodeLogger(n)
		keep = append(keep, log, log.With("pid", 4242))
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / runs
	t.Logf("a node's two loggers: %d bytes", per)
	if per > 800 {
		t.Fatalf("a node's two loggers allocate %d bytes, want at most 800", per)
	}
	runtime.KeepAlive(keep)
}
