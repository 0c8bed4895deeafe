package api

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// benchPayload is a spawn payload of a realistic size: a contract, a seed,
// a scope and limits.
func benchPayload() SpawnPayload {
	return SpawnPayload{
		AgentID: "3", AgentPath: "0.3", Depth: 1,
		Contract: OutputContract{Objective: "summarize the open issues of the repository and rank them by impact", OutputFormat: OutputFormat{Kind: FormatText}},
		Seed:     ContextSeed{Slices: []SeedSlice{{Label: "turn 1 request", Content: SeedContent{Text: "what is open?"}}, {Label: "turn 1 answer", Content: SeedContent{Text: "twelve issues, three of them bugs"}}}},
		Scope:    ToolScope{Allow: []ToolRef{{Server: "gh", Tool: "search"}, {Server: "gh", Tool: "read"}}},
		Limits:   Limits{MaxSteps: 50, MaxTokens: 200000, Deadline: Duration(10 * time.Minute), MaxChildren: 8},
		Telemetry: Telemetry{RunID: "01a22e5f-3d10-7e17-9f9a-18405824b86c", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		Intelligence: Intelligence{Endpoint: "builtin:demo"},
	}
}

// BenchmarkFrameSendSpawn encodes and writes one spawn frame: the supervisor's
// side of every spawn, warm or cold.
func BenchmarkFrameSendSpawn(b *testing.B) {
	w := NewFrameWriter(io.Discard, 0)
	p := benchPayload()
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Send(MethodSpawn, 0, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrameReadSpawn reads and decodes one spawn frame: the child's side.
func BenchmarkFrameReadSpawn(b *testing.B) {
	var buf bytes.Buffer
	if err := NewFrameWriter(&buf, 0).Send(MethodSpawn, 0, benchPayload()); err != nil {
		b.Fatal(err)
	}
	r := NewFrameReader(&repeatReader{frame: buf.Bytes()}, 0)
	b.ReportAllocs()
	for b.Loop() {
		f, err := r.Read()
		if err != nil {
			b.Fatal(err)
		}
		var p SpawnPayload
		if err := DecodeParams(f, &p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrameEvent is one loop/event written and read back: the traffic of
// every step.
func BenchmarkFrameEvent(b *testing.B) {
	var buf bytes.Buffer
	w := NewFrameWriter(&buf, 0)
	r := NewFrameReader(&buf, 0)
	ev := LoopEvent{Step: 3, Kind: EventModel, UsageDelta: Usage{TokensIn: 1200, TokensOut: 340, Steps: 1}}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Send(MethodEvent, 0, ev); err != nil {
			b.Fatal(err)
		}
		f, err := r.Read()
		if err != nil {
			b.Fatal(err)
		}
		var got LoopEvent
		if err := DecodeParams(f, &got); err != nil {
			b.Fatal(err)
		}
	}
}

// repeatReader yields frame over and over.
type repeatReader struct {
	frame []byte
	off   int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r.frame[r.off:])
	r.off = (r.off + n) % len(r.frame)
	return n, nil
}
