package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/agent/intelligence"
)

// scriptModel answers from a list of canned turns.
type scriptModel struct {
	turns []*intelligence.Response
	err   error
	calls int
}

func (m *scriptModel) Complete(ctx context.Context, req *intelligence.Request) (*intelligence.Response, error) {
	if m.err != nil {
		return nil, m.err
	}
	if m.calls >= len(m.turns) {
		return m.turns[len(m.turns)-1], nil
	}
	m.calls++
	return m.turns[m.calls-1], nil
}

type nopTools struct{ calls []string }

func (n *nopTools) CallTool(ctx context.Context, name string, args json.RawMessage) (api.ToolResult, error) {
	n.calls = append(n.calls, name)
	return api.TextResult("ok", false), nil
}

type events struct{ n int }

func (e *events) Event(step int, kind string, delta api.Usage) { e.n++ }

func payload() *api.SpawnPayload {
	return &api.SpawnPayload{
		AgentID: "0", AgentPath: "0",
		Contract:     api.OutputContract{Objective: "do it", OutputFormat: api.OutputFormat{Kind: api.FormatMarkdown}, Boundaries: "nothing else"},
		Limits:       api.Limits{MaxSteps: 3, MaxTokens: 1000, Deadline: api.Duration(time.Minute), MaxRepeats: 10},
		Telemetry:    api.Telemetry{RunID: "r"},
		Intelligence: api.Intelligence{Endpoint: "builtin:demo"},
	}
}

func toolTurn() *intelligence.Response {
	return &intelligence.Response{Content: "thinking", ToolCalls: []intelligence.ToolCall{{ID: "1", Name: "t"}}, Finish: intelligence.FinishToolCalls, Usage: api.Usage{TokensIn: 10, TokensOut: 5}}
}

func TestLoopStopConditions(t *testing.T) {
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(ErrCancelled)
	expired, stop := context.WithTimeout(context.Background(), 0)
	defer stop()
	wait, err := intelligence.New(api.Intelligence{Endpoint: "builtin:wait"}, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		model  intelligence.Model
		ctx    context.Context
		tokens int64
		want   api.TerminalStatus
		cause  string
	}{
		{"completed", &scriptModel{turns: []*intelligence.Response{{Content: "answer", Finish: intelligence.FinishStop}}}, context.Background(), 1000, api.StatusCompleted, ""},
		{"steps", &scriptModel{turns: []*intelligence.Response{toolTurn()}}, context.Background(), 1000, api.StatusExhaustedSteps, ""},
		{"tokens", &scriptModel{turns: []*intelligence.Response{toolTurn()}}, context.Background(), 20, api.StatusExhaustedTokens, ""},
		{"refusal", &scriptModel{turns: []*intelligence.Response{{Finish: intelligence.FinishRefusal, Refusal: "no"}}}, context.Background(), 1000, api.StatusRefused, ""},
		{"content filter", &scriptModel{turns: []*intelligence.Response{{Finish: intelligence.FinishContentFilter}}}, context.Background(), 1000, api.StatusRefused, ""},
		{"cancelled", &scriptModel{turns: []*intelligence.Response{toolTurn()}}, cancelled, 1000, api.StatusCancelled, ""},
		{"deadline", wait, expired, 1000, api.StatusDeadline, ""},
		{"unreachable", &scriptModel{err: fmt.Errorf("dial: %w", intelligence.ErrUnreachable)}, context.Background(), 1000, api.StatusCrashed, api.CauseIntelligenceUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := payload()
			p.Limits.MaxTokens = tt.tokens
			ev := &events{}
			l := &Loop{Payload: p, Model: tt.model, Caller: &nopTools{}, Report: ev}
			res := l.Run(tt.ctx)
			if res.Status != tt.want || res.Cause != tt.cause {
				t.Fatalf("result = %+v, want %s/%s", res, tt.want, tt.cause)
			}
		})
	}
}

func TestLoopPartialDistillateAndUsage(t *testing.T) {
	ev := &events{}
	tools := &nopTools{}
	res := (&Loop{Payload: payload(), Model: &scriptModel{turns: []*intelligence.Response{toolTurn()}}, Caller: tools, Report: ev}).Run(context.Background())
	if res.Status != api.StatusExhaustedSteps || res.Distillate.Text() != "thinking" {
		t.Fatalf("partial: %+v", res)
	}
	if res.Usage.Steps != 3 || res.Usage.TokensIn != 30 || len(tools.calls) != 3 || ev.n != 6 {
		t.Fatalf("usage %+v, %d tool calls, %d events", res.Usage, len(tools.calls), ev.n)
	}
}

func TestSystemPromptFromContract(t *testing.T) {
	p := payload()
	p.Seed.Slices = []api.SeedSlice{{Label: "file", Content: api.SeedContent{Text: "/etc/x"}}}
	sys := SystemPrompt(p)
	for _, want := range []string{"first user message states it", "Markdown", "nothing else"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}
	if u := userPrompt(p); !strings.HasPrefix(u, p.Contract.Objective+"\n\n") || !strings.Contains(u, "[file]\n/etc/x") {
		t.Errorf("user prompt lacks the objective or the seed: %q", u)
	}
}

// TestServeOverPipes plays the supervisor against Serve: ready, spawn, the
// answer's text events, the model's loop/event, the result; then a cancelled run answers pings while blocked.
func TestServeOverPipes(t *testing.T) {
	run := func(endpoint string) (*api.FrameReader, *api.FrameWriter, <-chan int) {
		r, w, _, code := serveOverPipes("", nil)
		f, err := r.Read()
		if err != nil || f.Method != api.MethodReady {
			t.Fatalf("first frame %+v %v", f, err)
		}
		p := payload()
		p.Intelligence.Endpoint = endpoint
		if err := w.Send(api.MethodSpawn, 0, p); err != nil {
			t.Fatal(err)
		}
		return r, w, code
	}

	r, _, code := run("builtin:demo")
	var methods []string
	var text, answer string
	for {
		f, err := r.Read()
		if err != nil {
			break
		}
		m := f.Method
		switch f.Method {
		case api.MethodResult:
			var res api.SubagentResult
			if err := api.DecodeParams(f, &res); err != nil || res.Status != api.StatusCompleted {
				t.Fatalf("result %+v %v", res, err)
			}
			answer = res.Distillate.Text()
		case api.MethodEvent:
			var ev api.LoopEvent
			if err := api.DecodeParams(f, &ev); err != nil {
				t.Fatal(err)
			}
			m += " " + ev.Kind
			text += ev.Text
		}
		if len(methods) == 0 || methods[len(methods)-1] != m {
			methods = append(methods, m)
		}
	}
	// The answer streams (text events, the first word at once, the rest
	// together), then the model's usage, then the result.
	if strings.Join(methods, ",") != "loop/event text,loop/event model,result" || text != answer || <-code != 0 {
		t.Fatalf("frames %v, text %q, answer %q", methods, text, answer)
	}

	r, w, code := run("builtin:wait")
	w.Send(api.MethodPing, 0, api.Ping{Seq: 7})
	f, err := r.Read()
	if err != nil || f.Method != api.MethodPong {
		t.Fatalf("no pong while the model call blocks: %+v %v", f, err)
	}
	w.Send(api.MethodCancel, 0, api.Cancel{Reason: "test"})
	f, err = r.Read()
	var res api.SubagentResult
	if err != nil || f.Method != api.MethodResult || api.DecodeParams(f, &res) != nil || res.Status != api.StatusCancelled {
		t.Fatalf("after cancel: %+v %+v %v", f, res, err)
	}
	if c := <-code; c != 0 {
		t.Fatalf("exit %d", c)
	}
}

// The rehearsal a child runs after ctrl/ready goes the whole way (decode,
// validate, a builtin:demo step, the result) without any I/O, and may run
// beside a real loop.
func TestRehearsal(t *testing.T) {
	done := make(chan api.SubagentResult, 2)
	for i := 0; i < 2; i++ {
		go func() { done <- rehearse(slog.DiscardHandler) }()
	}
	for i := 0; i < 2; i++ {
		res := <-done
		if res.Status != api.StatusCompleted || !strings.Contains(res.Distillate.Text(), "4 words") {
			t.Fatalf("rehearsal = %+v", res)
		}
	}
}

// The objective is in a run's conversation once, in the first user turn,
// which is the payload's own string (not a copy of it); the system prompt
// refers to it and allocates nothing for it. It held a copy of the
// objective too: sent twice to the model, and in a child a second 64 KiB
// (figure 9's) on the heap all the run.
func TestTheObjectiveIsInTheConversationOnce(t *testing.T) {
	p := payload()
	p.Contract.Objective = strings.Repeat("the earlier turns ", 100<<10/18)
	p.Contract.ToolGuidance = strings.Repeat("guidance ", 10<<10/9)
	r, err := (&Loop{Payload: p}).begin()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.req.System, "the earlier turns") {
		t.Error("the system prompt holds the objective")
	}
	if m := r.req.Messages[0].Content; unsafe.StringData(m) != unsafe.StringData(p.Contract.Objective) || len(m) != len(p.Contract.Objective) {
		t.Error("the first user turn is not the payload's objective")
	}
	n := len(SystemPrompt(p))
	// The runtime counts small objects' bytes by the span (24 KiB for a
	// 12 KiB prompt), so the bound is loose: well under the objective.
	if got := allocated(func() {}, func() { SystemPrompt(p) }); got > uint64(len(p.Contract.Objective)/2) {
		t.Fatalf("a %d-byte system prompt allocated %d bytes (the objective is %d)", n, got, len(p.Contract.Objective))
	}
}

// The repeat check's key of a call is a 32-byte digest, the same for
// arguments that differ only in spacing and key order and different for any
// other difference; it held the canonical arguments (figure 9's 16 KiB
// handle) for the rest of the run.
func TestCallKey(t *testing.T) {
	same := [][2]string{
		{`{"a":1,"b":[true,null,"x"]}`, ` { "b" : [ true , null , "x" ] , "a" : 1.0 } `},
		{`{"o":{"y":2,"x":1}}`, `{"o":{"x":1,"y":2}}`},
		{`not json`, `not json`},
	}
	for _, c := range same {
		if callKey("t", json.RawMessage(c[0])) != callKey("t", json.RawMessage(c[1])) {
			t.Errorf("%s and %s: different keys", c[0], c[1])
		}
	}
	differ := [][2]string{
		{`{"a":1}`, `{"a":"1"}`},
		{`["a","b"]`, `["ab"]`},
		{`{"a":"b"}`, `{"ab":""}`},
		{`[[1],2]`, `[[1,2]]`},
		{`{"a":null}`, `{}`},
		{`"x"`, `x`},
	}
	for _, c := range differ {
		if callKey("t", json.RawMessage(c[0])) == callKey("t", json.RawMessage(c[1])) {
			t.Errorf("%s and %s: the same key", c[0], c[1])
		}
	}
	if callKey("t", json.RawMessage(`{}`)) == callKey("u", json.RawMessage(`{}`)) {
		t.Error("two tools' calls: the same key")
	}
	big := json.RawMessage(`{"handle":"` + strings.Repeat("h", 16<<10) + `"}`)
	if n := len(callKey("subagent.status", big)); n != 32 {
		t.Fatalf("the key of a %d-byte call is %d bytes, want 32", len(big), n)
	}
}
