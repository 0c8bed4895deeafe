package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// rehearse runs once, on a sample payload and with nothing connected, the
// path a payload takes through the child: the spawn frame's decoding and
// validation, the loop with builtin:demo (system prompt, one model step,
// result shaping), and the encoding of the frames that go back. Serve runs
// it (awaitSpawn) when ctrl/rehearse comes before the payload: the warm pool
// sends it to its next child in line, so that child has built its JSON type
// caches and paged in that code before its payload arrives (on a small
// machine that was most of the time from payload to first step), and the
// pool's other children do not carry them while they wait. A child spawned
// cold gets its payload at once and skips it: its payload's run builds the
// same caches.
//
// It does no I/O: events, tool calls and logs go nowhere (its log line goes
// to h, which Serve makes a handler like its own over io.Discard, so that
// the run's first line finds that code paged in; logInfo, so that it maps
// none of the function table), and it never touches the control channel.
// It returns the sample run's result.
func rehearse(h slog.Handler) api.SubagentResult {
	sample := api.SpawnPayload{
		AgentID: "0", AgentPath: "0",
		Contract:     api.OutputContract{Objective: "rehearse the warm path", OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Seed:         api.ContextSeed{Slices: []api.SeedSlice{{Label: "sample", Content: api.SeedContent{Text: "sample"}}}},
		Limits:       api.Limits{MaxSteps: 2, MaxTokens: 10000, Deadline: api.Duration(time.Minute), MaxChildren: 1, DistillateBudget: api.DefaultDistillateBudget},
		Telemetry:    api.Telemetry{RunID: "rehearsal"},
		Intelligence: api.Intelligence{Endpoint: "builtin:demo"},
	}
	w := api.NewFrameWriter(io.Discard, 0)
	var buf frameCapture
	failed := api.SubagentResult{Status: api.StatusCrashed, Distillate: api.InlineText("")}
	if err := api.NewFrameWriter(&buf, 0).Send(api.MethodSpawn, 0, sample); err != nil {
		return failed
	}
	f, err := api.DecodeFrameBody(buf.body())
	if err != nil {
		return failed
	}
	var p api.SpawnPayload
	if api.DecodeParams(f, &p) != nil || p.Validate() != nil {
		return failed
	}
	log := slog.New(h).With("run_id", p.Telemetry.RunID, "agent_path", p.AgentPath)
	model, err := intelligence.New(p.Intelligence, "")
	if err != nil {
		return failed
	}
	loop := &Loop{Payload: &p, Model: model, Tools: offeredTools(&p), Caller: silent{}, Report: silent{}, Log: log}
	ctx, cancel := context.WithTimeout(unsampled(), time.Minute)
	defer cancel()
	res := loop.Run(ctx)
	logInfo(log, "subagent finished", "status", res.Status, "steps", res.Usage.Steps)
	_ = w.Send(api.MethodEvent, 0, api.LoopEvent{Step: 1, Kind: api.EventModel, UsageDelta: res.Usage})
	_ = w.Send(api.MethodResult, 0, res)
	return res
}

// unsampled returns a context whose parent span is not sampled: with the
// parent-based sampler, nothing the rehearsal starts is recorded or exported.
func unsampled() context.Context {
	return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x72, 0x65, 0x68, 0x65, 0x61, 0x72, 0x73, 0x65}, // "rehearse"
		SpanID:  trace.SpanID{0x72, 0x65, 0x68},
	}))
}

// silent is the rehearsal's tool caller and reporter: it calls nothing and
// reports nowhere.
type silent struct{}

func (silent) CallTool(context.Context, string, json.RawMessage) (api.ToolResult, error) {
	return api.TextResult("rehearsal: no tools", true), nil
}

func (silent) Event(int, string, api.Usage) {}

// frameCapture keeps the one frame written to it.
type frameCapture struct{ b []byte }

func (c *frameCapture) Write(p []byte) (int, error) {
	c.b = append(c.b, p...)
	return len(p), nil
}

// body is the frame without its length prefix.
func (c *frameCapture) body() []byte {
	if len(c.b) < 4 {
		return nil
	}
	return c.b[4:]
}
