package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
	"github.com/agentd/agentd/internal/telemetry"
)

// The child's spans: one for its whole run, parented by the traceparent in its
// payload (the supervisor's spawn span), and one per model call and per tool
// call inside it. The child exports them itself, through the OTEL_* variables
// the supervisor passes on, and flushes them before its result frame.

// startRunSpan starts the span of the child's run.
func startRunSpan(ctx context.Context, p *api.SpawnPayload) (context.Context, trace.Span) {
	ctx = telemetry.FromTelemetry(ctx, p.Telemetry)
	return telemetry.Tracer().Start(ctx, "agentd.run", trace.WithAttributes(
		attribute.String("agentd.run_id", p.Telemetry.RunID),
		attribute.String("agentd.agent_path", p.AgentPath),
		attribute.Int("agentd.depth", p.Depth),
	))
}

// endRunSpan ends the run's span with its result; its detail is on the span
// only when it holds no content or content is on.
func endRunSpan(span trace.Span, res api.SubagentResult, content bool) {
	span.SetAttributes(
		attribute.String("agentd.status", string(res.Status)),
		attribute.Int("agentd.steps", res.Usage.Steps),
		attribute.Int64("gen_ai.usage.input_tokens", res.Usage.TokensIn),
		attribute.Int64("gen_ai.usage.output_tokens", res.Usage.TokensOut),
	)
	if res.Status != api.StatusCompleted {
		span.SetStatus(codes.Error, telemetry.ResultDescription(res, content))
	}
	span.End()
}

// startModelSpan starts the span of one model call (an OpenTelemetry GenAI
// "chat" span). With content on it carries the system prompt and the
// conversation sent.
func startModelSpan(ctx context.Context, p *api.SpawnPayload, step int, req *intelligence.Request) (context.Context, trace.Span) {
	model := p.Intelligence.Model
	if model == "" {
		model, _, _ = strings.Cut(p.Intelligence.Endpoint, "=")
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", model),
		attribute.Int("agentd.step", step),
	}
	if p.Telemetry.LogContent {
		attrs = append(attrs,
			attribute.String(telemetry.AttrSystemInstructions, telemetry.Clip(req.System)),
			attribute.String(telemetry.AttrInputMessages, telemetry.Clip(messagesJSON(req.Messages))))
	}
	return telemetry.Tracer().Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endModelSpan ends a model call's span with its usage and finish reason, and
// with content on, the answer.
func endModelSpan(span trace.Span, resp *intelligence.Response, err error, content bool) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else if resp != nil {
		span.SetAttributes(
			attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.TokensIn),
			attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.TokensOut),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{string(resp.Finish)}),
		)
		if content {
			out := intelligence.Message{Role: intelligence.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls}
			span.SetAttributes(attribute.String(telemetry.AttrOutputMessages, telemetry.Clip(messagesJSON([]intelligence.Message{out}))))
		}
	}
	span.End()
}

// startToolSpan starts the span of one tool call ("execute_tool"); its
// traceparent rides in the tool/call frame, so the supervisor's side of the
// call is its child. With content on it carries the arguments.
func startToolSpan(ctx context.Context, wire string, args []byte, content bool) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", wire),
	}
	if content {
		attrs = append(attrs, attribute.String(telemetry.AttrToolArguments, telemetry.Clip(string(args))))
	}
	return telemetry.Tracer().Start(ctx, "execute_tool "+wire, trace.WithAttributes(attrs...))
}

// endToolSpan ends a tool call's span, with content on with its result.
func endToolSpan(span trace.Span, out api.ToolResult, err error, content bool) {
	if content && err == nil {
		span.SetAttributes(attribute.String(telemetry.AttrToolResult, telemetry.Clip(toolText(out))))
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case out.IsError:
		span.SetStatus(codes.Error, "tool result is an error")
	}
	span.End()
}

// messagesJSON renders messages for a content attribute or log line.
func messagesJSON(msgs []intelligence.Message) string {
	type call struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"arguments,omitempty"`
	}
	type msg struct {
		Role      string `json:"role"`
		Content   string `json:"content,omitempty"`
		ToolCalls []call `json:"tool_calls,omitempty"`
	}
	out := make([]msg, len(msgs))
	for i, m := range msgs {
		out[i] = msg{Role: string(m.Role), Content: m.Content}
		for _, tc := range m.ToolCalls {
			a := tc.Args
			if !json.Valid(a) {
				a = nil
			}
			out[i].ToolCalls = append(out[i].ToolCalls, call{Name: tc.Name, Args: a})
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// Flush budgets: how long a child waits for its spans to reach the collector
// before its result frame. A run that ended at its deadline or by a cancel has
// the kill ladder's grace, not more.
const (
	maxFlush = time.Second
	minFlush = 100 * time.Millisecond
)

// flushSpans exports the run's spans before the result frame, bounded by what
// is left of the deadline (between minFlush and maxFlush).
func flushSpans(tp *telemetry.Provider, deadline time.Time, log *slog.Logger) {
	if tp.Export() != telemetry.ExportOTLP {
		return
	}
	budget := min(time.Until(deadline), maxFlush)
	budget = max(budget, minFlush)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("spans not flushed", "err", err)
	}
}
