package agent

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// The rehearsal a warm child runs before its payload is not work: it records
// no span (a pooled child's rehearsal once showed up as a stray root span in
// the trace of the run it was later given).
func TestRehearsalRecordsNoSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	if res := rehearse(slog.DiscardHandler); res.Status != api.StatusCompleted {
		t.Fatalf("rehearsal ended %s: %s", res.Status, res.Detail)
	}
	if n := len(rec.Ended()) + len(rec.Started()); n != 0 {
		t.Fatalf("the rehearsal recorded %d spans, want none", n)
	}
}

// rehearsals plays the warm pool for one child run by Serve: after the
// child's ctrl/ready it sends the frames before (ctrl/rehearse, or nothing)
// and then the spawn frame, waiting late before the spawn when late is set.
// It returns the run's result and how many rehearsals the child logged
// (api.EnvChildMemStats' "rehearsed" record).
func rehearsals(t *testing.T, before []string, late time.Duration) (api.SubagentResult, int) {
	t.Helper()
	t.Setenv(api.EnvChildMemStats, "1")
	var logs testkit.Buffer
	r, w, inW, code := serveOverPipes("", &logs)
	defer inW.Close()
	f, err := r.Read()
	if err != nil || f.Method != api.MethodReady {
		t.Fatalf("first frame %v, %v; want ctrl/ready", f, err)
	}
	for _, m := range before {
		if err := w.Send(m, 0, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The payload's timing is the scenario's (a warm child is taken long
	// after its ctrl/ready), not a synchronization.
	time.Sleep(late)
	if err := w.Send(api.MethodSpawn, 0, payload()); err != nil {
		t.Fatal(err)
	}
	var res api.SubagentResult
	for {
		f, err := r.Read()
		if err != nil {
			t.Fatalf("no result: %v", err)
		}
		if f.Method == api.MethodResult {
			if err := api.DecodeParams(f, &res); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	inW.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d; log:\n%s", c, logs.String())
	}
	n := 0
	for _, rec := range logs.Records("memory classes") {
		if rec["at"] == "rehearsed" {
			n++
		}
	}
	return res, n
}

// The warm pool's next child in line is sent ctrl/rehearse: it rehearses,
// once however many come, and then runs the payload that follows.
func TestChildRehearsesWhenAsked(t *testing.T) {
	res, n := rehearsals(t, []string{api.MethodRehearse, api.MethodRehearse}, 0)
	if res.Status != api.StatusCompleted {
		t.Fatalf("result = %+v", res)
	}
	if n != 1 {
		t.Fatalf("the child rehearsed %d times, want 1", n)
	}
}

// A child whose payload comes first, however late, never rehearses: only
// the pool's next child in line does, when asked (a child rehearsed on its
// own 5 ms after ctrl/ready, every child of the pool ~150 KiB larger while
// it waited).
func TestChildSpawnedFirstDoesNotRehearse(t *testing.T) {
	res, n := rehearsals(t, nil, 30*time.Millisecond)
	if res.Status != api.StatusCompleted {
		t.Fatalf("result = %+v", res)
	}
	if n != 0 {
		t.Fatalf("the child rehearsed %d times before a payload that came first, want 0", n)
	}
}

// Any first frame but ctrl/rehearse and the spawn is refused as before:
// the child exits 1 without a payload, and does not rehearse.
func TestChildRefusesAnotherFirstFrame(t *testing.T) {
	t.Setenv(api.EnvChildMemStats, "1")
	var logs testkit.Buffer
	r, w, inW, code := serveOverPipes("", &logs)
	defer inW.Close()
	if f, err := r.Read(); err != nil || f.Method != api.MethodReady {
		t.Fatalf("first frame %v, %v; want ctrl/ready", f, err)
	}
	if err := w.Send(api.MethodResume, 0, nil); err != nil {
		t.Fatal(err)
	}
	if c := <-code; c != 1 {
		t.Fatalf("exit %d, want 1", c)
	}
	if !strings.Contains(logs.String(), `first frame is \"ctrl/resume\", want \"spawn\"`) || strings.Contains(logs.String(), `"rehearsed"`) {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// infoRecorder is a handler at Info, as a child's is: it keeps the
// message and program counter of each record it is handed.
type infoRecorder struct {
	mu   sync.Mutex
	msgs []string
	pcs  []uintptr
}

func (h *infoRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *infoRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	h.pcs = append(h.pcs, r.PC)
	return nil
}

func (h *infoRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *infoRecorder) WithGroup(string) slog.Handler      { return h }

// The rehearsal logs its line into the handler Serve gives it (a twin of the
// run's, over io.Discard), and unwinds no stack for it: slog.Logger's
// methods take the caller's program counter with runtime.Callers, which
// read agentd's own pages of the binary's function table, and the pool's
// next child alone then mapped three 64 KiB windows of it, 192 KiB of its
// private memory (figure 9).
func TestRehearsalLogsWithoutUnwinding(t *testing.T) {
	h := &infoRecorder{}
	if res := rehearse(h); res.Status != api.StatusCompleted {
		t.Fatalf("rehearsal ended %s: %s", res.Status, res.Detail)
	}
	if len(h.msgs) == 0 {
		t.Fatal("the rehearsal logged nothing: the run's log handler is not rehearsed")
	}
	for i, pc := range h.pcs {
		if pc != 0 {
			t.Errorf("%q was logged with the caller's pc %#x: the stack was unwound for it", h.msgs[i], pc)
		}
	}
}

// logInfo is log.Info without the caller's program counter: the same
// record otherwise, and nothing when the handler is not at Info.
func TestLogInfoUnwindsNoStack(t *testing.T) {
	h := &infoRecorder{}
	logInfo(slog.New(h), "subagent started", "depth", 1)
	if len(h.msgs) != 1 || h.msgs[0] != "subagent started" || h.pcs[0] != 0 {
		t.Fatalf("records %q, pcs %#x; want one \"subagent started\" with pc 0", h.msgs, h.pcs)
	}
	var out bytes.Buffer
	logInfo(slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn})), "subagent started")
	if out.Len() != 0 {
		t.Fatalf("a handler at Warn was handed %s", out.String())
	}
	logInfo(slog.New(slog.NewJSONHandler(&out, nil)).With("run_id", "r"), "subagent finished", "steps", 2)
	if s := out.String(); !strings.Contains(s, `"msg":"subagent finished","run_id":"r","steps":2}`) || !strings.Contains(s, `"level":"INFO"`) {
		t.Fatalf("logged %s", s)
	}
}

// The spawn frame the rehearsal decodes is written out, not encoded in the
// child: it must stay what the supervisor sends for the sample, byte for
// byte, so that the rehearsal decodes what a payload's decoding meets (a
// field added to the payload changes the encoding and fails this until the
// literal is written again).
func TestRehearsalSpawnIsEncoded(t *testing.T) {
	sample := &api.SpawnPayload{
		AgentID: "0", AgentPath: "0",
		Contract:     api.OutputContract{Objective: "rehearse the warm path", OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Seed:         api.ContextSeed{Slices: []api.SeedSlice{{Label: "sample", Content: api.SeedContent{Text: "sample"}}}},
		Limits:       api.Limits{MaxSteps: 2, MaxTokens: 10000, Deadline: api.Duration(time.Minute), MaxChildren: 1, DistillateBudget: api.DefaultDistillateBudget},
		Telemetry:    api.Telemetry{RunID: "rehearsal"},
		Intelligence: api.Intelligence{Endpoint: "builtin:demo"},
	}
	if got, want := rehearsalSpawn, string(spawnFrameBody(t, sample)); got != want {
		t.Fatalf("rehearsalSpawn is\n%s\nthe sample encodes as\n%s", got, want)
	}
}
