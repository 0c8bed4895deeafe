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
//
// The spawn frame it decodes is written out (rehearsalSpawn), not encoded
// here: a child decodes spawn payloads (decodeSpawn) and never encodes one,
// and encoding the sample built encoding/json's encoders for all of
// api.SpawnPayload, which decodeSpawn exists not to build.
func rehearse(h slog.Handler) api.SubagentResult {
	w := api.NewFrameWriter(io.Discard, 0)
	failed := api.SubagentResult{Status: api.StatusCrashed, Distillate: api.InlineText("")}
	f, err := api.DecodeFrameBody([]byte(rehearsalSpawn))
	if err != nil {
		return failed
	}
	var p api.SpawnPayload
	if decodeSpawnParams(f.Params, &p) != nil || p.Validate() != nil { // as a payload is decoded: its caches are what the run needs
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

// rehearsalSpawn is the body of the spawn frame the rehearsal decodes: what
// the supervisor sends for a sample payload (one step of builtin:demo, a
// text contract, one seed slice), byte for byte as api's FrameWriter encodes
// it (TestRehearsalSpawnIsEncoded holds it to that).
const rehearsalSpawn = `{"jsonrpc":"2.0","method":"spawn","params":{"agent_id":"0","agent_path":"0","depth":0,"contract":{"objective":"rehearse the warm path","output_format":{"kind":"text"}},"seed":{"slices":[{"label":"sample","content":{"text":"sample"}}]},"scope":{"tags":{"untrusted_input":false,"sensitive":false,"egress":false}},"limits":{"max_steps":2,"max_tokens":10000,"deadline":"1m0s","max_children":1,"distillate_budget":8000},"telemetry":{"run_id":"rehearsal"},"intelligence":{"endpoint":"builtin:demo"}}}`

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
