package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// fakeLLM is an OpenAI-compatible Chat Completions server scripted per
// request: the nth request is answered by the nth step. It records every
// request it gets.
type fakeLLM struct {
	t   *testing.T
	srv *httptest.Server

	mu     sync.Mutex // guards script, reqs
	script []llmStep
	reqs   []llmRequest
}

// llmStep answers one request.
type llmStep func(w http.ResponseWriter, r *http.Request)

// llmRequest is one request as the server saw it.
type llmRequest struct {
	At     time.Time
	Path   string
	Header http.Header
	Body   seenRequest
	Raw    []byte // the body as sent
}

type seenRequest struct {
	Model    string        `json:"model"`
	Messages []seenMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

type seenMessage struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (m seenMessage) text() string {
	s, _ := m.Content.(string)
	return s
}

func newFakeLLM(t *testing.T, script ...llmStep) *fakeLLM {
	f := &fakeLLM{t: t, script: script}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// endpoint is the base URL agentd is pointed at.
func (f *fakeLLM) endpoint() string { return f.srv.URL + "/v1" }

func (f *fakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body seenRequest
	if err := json.Unmarshal(b, &body); err != nil {
		f.t.Errorf("fake LLM: bad request body: %v\n%s", err, b)
	}
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, llmRequest{At: time.Now(), Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: b})
	var s llmStep
	if n < len(f.script) {
		s = f.script[n]
	}
	f.mu.Unlock()
	if s == nil {
		f.t.Errorf("fake LLM: unscripted request %d", n+1)
		http.Error(w, `{"error":{"message":"unscripted"}}`, http.StatusInternalServerError)
		return
	}
	s(w, r)
}

func (f *fakeLLM) requests() []llmRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]llmRequest(nil), f.reqs...)
}

// --- scripted answers ---

type callSpec struct{ name, args string }

func completion(content, refusal, finish string, in, out int64, calls ...callSpec) llmStep {
	return func(w http.ResponseWriter, r *http.Request) {
		msg := map[string]any{"role": "assistant", "content": content, "refusal": nil}
		if refusal != "" {
			msg["refusal"] = refusal
		}
		if len(calls) > 0 {
			var tcs []map[string]any
			for i, c := range calls {
				tcs = append(tcs, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
					"function": map[string]any{"name": c.name, "arguments": c.args}})
			}
			msg["tool_calls"] = tcs
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-test", "object": "chat.completion", "created": 1, "model": "test-model",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
		})
	}
}

func answer(content string, in, out int64) llmStep { return completion(content, "", "stop", in, out) }

func toolCalls(in, out int64, calls ...callSpec) llmStep {
	return completion("", "", "tool_calls", in, out, calls...)
}

// rawAnswer answers with status code, the media type and body given.
func rawAnswer(code int, mediaType, body string) llmStep {
	return func(w http.ResponseWriter, r *http.Request) {
		if mediaType != "" {
			w.Header().Set("Content-Type", mediaType)
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

func httpError(code int, header ...string) llmStep {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"scripted %d","type":"test"}}`, code)
	}
}

// hang never answers; it returns when the client goes away.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// --- the supervisor's end of the control channel, scripted ---

// superEnd plays the supervisor for one child run by Serve over pipes.
type superEnd struct {
	tool    func(call api.ToolCall) api.ToolResult // nil answers every call with an error result
	blobErr string                                 // non-empty refuses blob/put with this message
	stderr  io.Writer                              // the child's log; nil discards it
}

// childRun is what the supervisor's end saw.
type childRun struct {
	result    api.SubagentResult
	events    []api.LoopEvent
	toolCalls []api.ToolCall
	blobs     []api.BlobPut
	intel     []api.IntelligenceReport
	exit      int
}

// eventUsage sums the usage deltas of the loop/events, as the supervisor's
// accounting does.
func (c childRun) eventUsage() api.Usage {
	var u api.Usage
	for _, e := range c.events {
		u = u.Add(e.UsageDelta)
	}
	return u
}

// runChild runs Serve on p with the scripted supervisor end and returns when
// the child has sent its result and returned.
// serveOverPipes runs Serve as the child end of a control channel made of two
// pipes, its log to stderr (nil: discarded), and returns the supervisor's
// end: the child's frames, a writer to it, control-in's write end (closing it
// is the supervisor going away), and Serve's exit code. When Serve returns,
// both pipes close, as the supervisor closes control-in once it reaped the
// child: that ends the child's control reader.
func serveOverPipes(key string, stderr io.Writer) (*api.FrameReader, *api.FrameWriter, io.Closer, <-chan int) {
	if stderr == nil {
		stderr = io.Discard
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- Serve(context.Background(), inR, outW, stderr, key)
		outW.Close()
		inW.Close()
	}()
	return api.NewFrameReader(outR, 0), api.NewFrameWriter(inW, 0), inW, code
}

func runChild(t *testing.T, p *api.SpawnPayload, key string, se superEnd) childRun {
	t.Helper()
	r, w, inW, code := serveOverPipes(key, se.stderr)
	done := make(chan childRun, 1)
	go func() {
		var run childRun
		defer func() { done <- run }()
		for {
			f, err := r.Read()
			if err != nil {
				return
			}
			switch f.Method {
			case api.MethodReady:
				if err := w.Send(api.MethodSpawn, 0, p); err != nil {
					t.Errorf("send spawn: %v", err)
					return
				}
			case api.MethodEvent:
				var ev api.LoopEvent
				if err := api.DecodeParams(f, &ev); err != nil {
					t.Errorf("loop/event: %v", err)
				}
				run.events = append(run.events, ev)
			case api.MethodToolCall:
				var call api.ToolCall
				if err := api.DecodeParams(f, &call); err != nil {
					t.Errorf("tool/call: %v", err)
				}
				run.toolCalls = append(run.toolCalls, call)
				res := api.TextResult("no such tool", true)
				if se.tool != nil {
					res = se.tool(call)
				}
				resp, _ := api.NewResponse(f.ID, res)
				w.Write(resp)
			case api.MethodBlobPut:
				var put api.BlobPut
				if err := api.DecodeParams(f, &put); err != nil {
					t.Errorf("blob/put: %v", err)
				}
				run.blobs = append(run.blobs, put)
				if se.blobErr != "" {
					w.Write(api.NewErrorResponse(f.ID, api.CodeRefused, se.blobErr))
					continue
				}
				resp, _ := api.NewResponse(f.ID, api.BlobRef{URI: api.BlobURI(fmt.Sprintf("blob%d", len(run.blobs))), Size: len(put.Content)})
				w.Write(resp)
			case api.MethodIntelligence:
				var r api.IntelligenceReport
				if err := api.DecodeParams(f, &r); err != nil {
					t.Errorf("intelligence/report: %v", err)
				}
				run.intel = append(run.intel, r)
			case api.MethodResult:
				if err := api.DecodeParams(f, &run.result); err != nil {
					t.Errorf("result: %v", err)
				}
			}
		}
	}()
	select {
	case run := <-done:
		inW.Close()
		run.exit = <-code
		return run
	case <-time.After(30 * time.Second):
		inW.Close()
		t.Fatal("the child did not finish within 30s")
		return childRun{}
	}
}

func intPtr(n int) *int { return &n }

// llmPayload is a payload pointed at the fake server, with retry timings in
// milliseconds.
func llmPayload(f *fakeLLM) *api.SpawnPayload {
	return &api.SpawnPayload{
		AgentID: "0", AgentPath: "0",
		Contract:  api.OutputContract{Objective: "count the words in the seed", OutputFormat: api.OutputFormat{Kind: api.FormatText}, ToolGuidance: "read files first"},
		Seed:      api.ContextSeed{Slices: []api.SeedSlice{{Label: "text", Content: api.SeedContent{Text: "alpha beta gamma"}}}},
		Limits:    api.Limits{MaxSteps: 10, MaxTokens: 100000, Deadline: api.Duration(20 * time.Second)},
		Telemetry: api.Telemetry{RunID: "run-llm"},
		Intelligence: api.Intelligence{Endpoint: f.endpoint(), Model: "test-model",
			Retries: intPtr(2), RetryBackoff: api.Duration(10 * time.Millisecond), RequestTimeout: api.Duration(10 * time.Second)},
	}
}

// offers reports whether tools offers the wire tool name.
func offers(tools []intelligence.ToolSpec, wire string) bool {
	for _, t := range tools {
		if t.Wire == wire {
			return true
		}
	}
	return false
}

func wantStatus(t *testing.T, run childRun, status api.TerminalStatus, cause string) {
	t.Helper()
	if run.result.Status != status || run.result.Cause != cause {
		t.Fatalf("result = %s/%s (%s), want %s/%s", run.result.Status, run.result.Cause, run.result.Detail, status, cause)
	}
	if run.exit != 0 {
		t.Fatalf("child exit %d", run.exit)
	}
}

// wantUsage checks the supervisor's view (the loop/event deltas) against the
// tokens the server reported, and the result against both.
func wantUsage(t *testing.T, run childRun, in, out int64, steps int) {
	t.Helper()
	ev := run.eventUsage()
	if ev.TokensIn != in || ev.TokensOut != out {
		t.Errorf("loop/event usage = %+v, want %d in, %d out", ev, in, out)
	}
	if r := run.result.Usage; r.TokensIn != in || r.TokensOut != out || r.Steps != steps {
		t.Errorf("result usage = %+v, want %d in, %d out, %d steps", r, in, out, steps)
	}
	models := 0
	for _, e := range run.events {
		if e.Kind == api.EventModel {
			models++
		}
	}
	if models != ev.Steps {
		t.Errorf("events %+v: want one step per model event", run.events)
	}
}

// canonicalJSON is the arguments with insignificant differences (spacing, key
// order) removed; invalid JSON is kept as is.
func canonicalJSON(b json.RawMessage) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(b)
	}
	return string(out)
}
