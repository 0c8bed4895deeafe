package intelligence

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/anthropictest"
)

// The Messages client against a local server that speaks the documented
// wire format (internal/anthropictest), with the official SDK's types as
// the oracle for every request sent and for the reading of streams.

func anthropicSpec(base string) api.Intelligence {
	return api.Intelligence{Endpoint: base, Model: "claude-test", Dialect: api.DialectAnthropic,
		Retries: intPtr(2), RetryBackoff: api.Duration(5 * time.Millisecond), RequestTimeout: api.Duration(10 * time.Second)}
}

// onlyEndpoint is the model of an intelligence of one endpoint, which New
// puts behind its breaker (failover.go).
func onlyEndpoint(t *testing.T, m Model) Model {
	t.Helper()
	if fm, ok := m.(*failoverModel); ok {
		if len(fm.eps) != 1 {
			t.Fatalf("%d endpoints, want 1", len(fm.eps))
		}
		return fm.eps[0].model
	}
	return m
}

func newAnthropic(t *testing.T, spec api.Intelligence, key string) *anthropicModel {
	t.Helper()
	m, err := New(spec, key)
	if err != nil {
		t.Fatal(err)
	}
	am, ok := onlyEndpoint(t, m).(*anthropicModel)
	if !ok {
		t.Fatalf("New with dialect anthropic gave a %T", m)
	}
	return am
}

func newMessagesServer(t *testing.T, script ...anthropictest.Step) *anthropictest.Server {
	t.Helper()
	s := anthropictest.NewServer(script...)
	t.Cleanup(func() {
		s.Close()
		if err := s.Err(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// conversation is a request with every kind of turn the loop makes: the
// system prompt, the seed, an assistant turn with text and two tool calls,
// their two results, an empty assistant turn and the loop's nudge, and
// tools whose schemas lack a type or are missing.
func conversation() *Request {
	return &Request{
		System: "you are terse",
		Messages: []Message{
			{Role: RoleUser, Content: "count the words"},
			{Role: RoleAssistant, Content: "reading both", ToolCalls: []ToolCall{
				{ID: "toolu_a", Name: "files__read", Args: json.RawMessage(`{"path":"/a","n":12345678901234567890}`)},
				{ID: "toolu_b", Name: "files__read", Args: json.RawMessage(`{"path":"/b"}`)},
			}},
			{Role: RoleTool, ToolCallID: "toolu_a", Content: "alpha beta"},
			{Role: RoleTool, ToolCallID: "toolu_b", Content: ""},
			{Role: RoleAssistant, Content: ""},
			{Role: RoleUser, Content: "Your reply was empty."},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "toolu_c", Name: "broken", Args: json.RawMessage(`{"path":`)}}},
			{Role: RoleTool, ToolCallID: "toolu_c", Content: "the arguments are not valid JSON"},
		},
		Tools: []ToolSpec{
			{Name: "files__read", Description: "read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "untyped", Parameters: json.RawMessage(`{"properties":{"q":{"type":"string"}}}`)},
			{Name: "bare"},
		},
	}
}

// TestAnthropicRequestMatchesSDK: what is sent, whole and streamed, is what
// the SDK's MessageNewParams holds (the server checks every body), with
// the key in x-api-key, the API version, max_tokens, the system prompt at
// the top, alternating turns, tool results in the user turn after their
// calls, and each tool's schema an object schema.
func TestAnthropicRequestMatchesSDK(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv := newMessagesServer(t, anthropictest.Message("end_turn", anthropictest.Usage{Input: 9, Output: 2}, anthropictest.Text("ok")))
		spec := anthropicSpec(srv.BaseURL())
		spec.MaxOutputTokens = 1234
		m := newAnthropic(t, spec, "sk-ant-test")
		req := conversation()
		var chunks []string
		if stream {
			req.OnText = func(s string) { chunks = append(chunks, s) }
		}
		resp, err := m.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "ok" || resp.Finish != FinishStop || strings.Join(chunks, "") != map[bool]string{false: "", true: "ok"}[stream] {
			t.Fatalf("stream %v: response %+v, chunks %q", stream, resp, chunks)
		}
		r := srv.Requests()[0]
		if r.Path != "/v1/messages" || r.Stream != stream {
			t.Errorf("request to %s, stream %v; want /v1/messages, stream %v", r.Path, r.Stream, stream)
		}
		if k, v, a := r.Header.Get("X-Api-Key"), r.Header.Get("Anthropic-Version"), r.Header.Get("Authorization"); k != "sk-ant-test" || v != anthropicVersion || a != "" {
			t.Errorf("x-api-key %q, anthropic-version %q, authorization %q", k, v, a)
		}
		p := r.Params
		if p.Model != "claude-test" || p.MaxTokens != 1234 || len(p.System) != 1 || p.System[0].Text != "you are terse" {
			t.Errorf("model %q, max_tokens %d, system %+v", p.Model, p.MaxTokens, p.System)
		}
		var roles []string
		for _, msg := range p.Messages {
			roles = append(roles, string(msg.Role))
		}
		if got := strings.Join(roles, ","); got != "user,assistant,user,assistant,user" {
			t.Fatalf("roles %s, want user,assistant,user,assistant,user (the empty assistant turn left out, consecutive turns merged)", got)
		}
		asst := p.Messages[1].Content
		if len(asst) != 3 || asst[0].OfText == nil || asst[1].OfToolUse == nil || asst[1].OfToolUse.ID != "toolu_a" || asst[2].OfToolUse.Name != "files__read" {
			t.Fatalf("assistant turn %s", mustJSON(p.Messages[1]))
		}
		if !bytes.Contains(r.Raw, []byte(`"n":12345678901234567890`)) {
			t.Errorf("a large integer argument was not sent as written: %s", r.Raw)
		}
		results := p.Messages[2].Content
		if len(results) != 3 || results[0].OfToolResult == nil || results[0].OfToolResult.ToolUseID != "toolu_a" ||
			results[1].OfToolResult == nil || results[1].OfToolResult.ToolUseID != "toolu_b" || results[2].OfText == nil {
			t.Fatalf("tool results turn %s", mustJSON(p.Messages[2]))
		}
		if in := p.Messages[3].Content[0].OfToolUse; in == nil || mustJSON(in.Input) != `{}` {
			t.Errorf("a call with malformed arguments is sent back as %s, want input {}", mustJSON(p.Messages[3]))
		}
		if len(p.Tools) != 3 {
			t.Fatalf("%d tools", len(p.Tools))
		}
		for _, tool := range p.Tools {
			if tool.OfTool == nil || string(tool.OfTool.InputSchema.Type) != "object" {
				t.Errorf("tool %s: input_schema type is not object", mustJSON(tool))
			}
		}
		if q := p.Tools[1].OfTool.InputSchema.Properties; mustJSON(q) != `{"q":{"type":"string"}}` {
			t.Errorf("an untyped schema lost its properties: %s", mustJSON(q))
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestAnthropicDefaults: no key sends no x-api-key, max_tokens defaults to
// api.DefaultMaxOutputTokens, and a base URL without a path gets /v1.
func TestAnthropicDefaults(t *testing.T) {
	srv := newMessagesServer(t, anthropictest.Message("end_turn", anthropictest.Usage{Input: 1, Output: 1}, anthropictest.Text("ok")))
	m := newAnthropic(t, anthropicSpec(srv.URL), "")
	if _, err := m.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if r.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != "" || r.Params.MaxTokens != api.DefaultMaxOutputTokens {
		t.Fatalf("path %s, x-api-key %q, max_tokens %d", r.Path, r.Header.Get("X-Api-Key"), r.Params.MaxTokens)
	}
}

// TestAnthropicAnswers: each stop reason maps to a finish reason, tool_use
// blocks become tool calls, and usage counts the cache's tokens in
// TokensIn; the same whole and streamed.
func TestAnthropicAnswers(t *testing.T) {
	u := anthropictest.Usage{Input: 10, Output: 5, CacheWrite: 100, CacheRead: 1000}
	wantUsage := api.Usage{TokensIn: 1110, TokensOut: 5, CacheWriteTokens: 100, CacheReadTokens: 1000}
	for _, tc := range []struct {
		stop   string
		blocks []anthropictest.Block
		finish FinishReason
		calls  int
	}{
		{"end_turn", []anthropictest.Block{anthropictest.Text("done")}, FinishStop, 0},
		{"stop_sequence", []anthropictest.Block{anthropictest.Text("done")}, FinishStop, 0},
		{"pause_turn", []anthropictest.Block{anthropictest.Text("done")}, FinishStop, 0},
		{"tool_use", []anthropictest.Block{anthropictest.Text("let me look"), anthropictest.ToolUse("toolu_1", "files__read", `{"path":"/x"}`), anthropictest.ToolUse("toolu_2", "ls", `{}`)}, FinishToolCalls, 2},
		{"max_tokens", []anthropictest.Block{anthropictest.Text("cut")}, FinishLength, 0},
		{"model_context_window_exceeded", []anthropictest.Block{anthropictest.Text("cut")}, FinishLength, 0},
		{"refusal", []anthropictest.Block{anthropictest.Text("I can't")}, FinishRefusal, 0},
	} {
		for _, stream := range []bool{false, true} {
			srv := newMessagesServer(t, anthropictest.Message(tc.stop, u, tc.blocks...))
			m := newAnthropic(t, anthropicSpec(srv.BaseURL()), "")
			req := &Request{Messages: []Message{{Role: RoleUser, Content: "go"}}}
			if stream {
				req.OnText = func(string) {}
			}
			resp, err := m.Complete(context.Background(), req)
			if err != nil {
				t.Fatalf("%s stream %v: %v", tc.stop, stream, err)
			}
			if resp.Finish != tc.finish || len(resp.ToolCalls) != tc.calls || resp.Usage != wantUsage {
				t.Errorf("%s stream %v: finish %s, %d calls, usage %+v; want %s, %d, %+v", tc.stop, stream, resp.Finish, len(resp.ToolCalls), resp.Usage, tc.finish, tc.calls, wantUsage)
			}
			if tc.calls == 2 && (resp.ToolCalls[0].ID != "toolu_1" || string(resp.ToolCalls[0].Args) != `{"path":"/x"}` || resp.Content != "let me look") {
				t.Errorf("stream %v: calls %+v, content %q", stream, resp.ToolCalls, resp.Content)
			}
			if tc.finish == FinishRefusal && resp.Refusal != "I can't" {
				t.Errorf("refusal %q", resp.Refusal)
			}
		}
	}
}

// TestAnthropicStreamMatchesSDK reads streams with the client and with the
// SDK's own decoder and accumulator, and wants the same message: text,
// tool calls and their input, stop reason and usage; and every text delta
// through OnText, in order, before Complete returns.
func TestAnthropicStreamMatchesSDK(t *testing.T) {
	thinking := []anthropictest.Event{
		anthropictest.Ev(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}}),
		anthropictest.Ev(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "thinking_delta", "thinking": "hmm"}}),
		anthropictest.Ev(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "signature_delta", "signature": "c2ln"}}),
		anthropictest.Ev(map[string]any{"type": "content_block_stop", "index": 0}),
	}
	plain := anthropictest.StreamEvents("tool_use", anthropictest.Usage{Input: 7, Output: 30, CacheRead: 50}, 2,
		anthropictest.Text("héllo, wörld"), anthropictest.ToolUse("toolu_9", "files__read", `{"path":"/x","deep":{"a":[1,2,3]}}`))
	// A thinking block first, and a message_delta with cumulative input
	// usage (which replaces message_start's).
	withThinking := append(append([]anthropictest.Event{plain[0]}, thinking...), shift(plain[1:len(plain)-2], 1)...)
	withThinking = append(withThinking,
		anthropictest.Ev(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"input_tokens": 70, "output_tokens": 31, "cache_read_input_tokens": 60}}),
		anthropictest.Ev(map[string]any{"type": "message_stop"}))
	for name, evs := range map[string][]anthropictest.Event{"plain": plain, "thinking": withThinking} {
		t.Run(name, func(t *testing.T) {
			srv := newMessagesServer(t, anthropictest.Stream(evs...))
			m := newAnthropic(t, anthropicSpec(srv.BaseURL()), "")
			var chunks []string
			req := &Request{Messages: []Message{{Role: RoleUser, Content: "go"}}, OnText: func(s string) { chunks = append(chunks, s) }}
			resp, err := m.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			sdk := sdkAccumulate(t, anthropictest.Encode(evs...))
			var text string
			var calls []ToolCall
			for _, b := range sdk.Content {
				switch b.Type {
				case "text":
					text += b.Text
				case "tool_use":
					calls = append(calls, ToolCall{ID: b.ID, Name: b.Name, Args: b.Input})
				}
			}
			if resp.Content != text || strings.Join(chunks, "") != text || len(chunks) < 2 {
				t.Errorf("content %q, chunks %q; the SDK read %q", resp.Content, chunks, text)
			}
			if len(resp.ToolCalls) != len(calls) {
				t.Fatalf("calls %+v; the SDK read %+v", resp.ToolCalls, calls)
			}
			for i := range calls {
				if resp.ToolCalls[i].ID != calls[i].ID || resp.ToolCalls[i].Name != calls[i].Name || string(resp.ToolCalls[i].Args) != string(calls[i].Args) {
					t.Errorf("call %d %+v (%s); the SDK read %+v (%s)", i, resp.ToolCalls[i], resp.ToolCalls[i].Args, calls[i], calls[i].Args)
				}
			}
			su := sdk.Usage
			want := api.Usage{TokensIn: su.InputTokens + su.CacheCreationInputTokens + su.CacheReadInputTokens, TokensOut: su.OutputTokens,
				CacheReadTokens: su.CacheReadInputTokens, CacheWriteTokens: su.CacheCreationInputTokens}
			if resp.Usage != want {
				t.Errorf("usage %+v; the SDK read %+v", resp.Usage, want)
			}
			wantFinish := map[anthropic.StopReason]FinishReason{"tool_use": FinishToolCalls, "end_turn": FinishStop}[sdk.StopReason]
			if len(calls) > 0 {
				wantFinish = FinishToolCalls
			}
			if resp.Finish != wantFinish {
				t.Errorf("finish %s; the SDK read stop reason %s", resp.Finish, sdk.StopReason)
			}
		})
	}
}

// shift renumbers the content block indexes of evs by n.
func shift(evs []anthropictest.Event, n int) []anthropictest.Event {
	out := make([]anthropictest.Event, len(evs))
	for i, ev := range evs {
		var v map[string]any
		json.Unmarshal([]byte(ev.Data), &v)
		if idx, ok := v["index"].(float64); ok {
			v["index"] = int(idx) + n
		}
		out[i] = anthropictest.Ev(v)
	}
	return out
}

// sdkAccumulate reads a stream's bytes with the SDK's decoder and
// accumulator.
func sdkAccumulate(t *testing.T, b []byte) anthropic.Message {
	t.Helper()
	res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(b))}
	st := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
	var msg anthropic.Message
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatalf("the SDK's accumulator: %v", err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("the SDK's stream: %v", err)
	}
	return msg
}

// TestAnthropicFailures: what a bad, failing or cut answer does: a clear
// error, or a retry (honouring Retry-After and x-should-retry), never a
// hang. A stream that fails after some of its text reached OnText is not
// retried.
func TestAnthropicFailures(t *testing.T) {
	ok := anthropictest.Message("end_turn", anthropictest.Usage{Input: 3, Output: 1}, anthropictest.Text("fine"))
	evs := anthropictest.StreamEvents("end_turn", anthropictest.Usage{Input: 3, Output: 1}, 2, anthropictest.Text("partial answer"))
	errEvent := func(typ string) anthropictest.Event {
		return anthropictest.Ev(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": "scripted " + typ}})
	}
	// evs[:2] is message_start and ping; evs[2] starts the text block and
	// evs[3] is its first delta.
	beforeText, afterText := evs[:3], evs[:4]
	garbage := anthropictest.Raw(200, "text/event-stream", "\x00\x01garbage\n\n")
	for _, tc := range []struct {
		name     string
		stream   bool
		script   []anthropictest.Step
		timeout  time.Duration
		requests int
		err      string // empty: success
	}{
		{name: "garbage body", script: []anthropictest.Step{anthropictest.Raw(200, "application/json", "<<not json>>")}, requests: 1, err: "decode answer"},
		{name: "not a message", script: []anthropictest.Step{anthropictest.Raw(200, "application/json", `{"id":"x","choices":[]}`)}, requests: 1, err: "not a Messages answer"},
		{name: "error body with 200", script: []anthropictest.Step{anthropictest.Raw(200, "application/json", `{"type":"error","error":{"type":"api_error","message":"boom"}}`)}, requests: 1, err: "api_error: boom"},
		{name: "proxy page then success", script: []anthropictest.Step{anthropictest.Raw(502, "text/html", "<html>bad gateway</html>"), ok}, requests: 2},
		{name: "overloaded then success", script: []anthropictest.Step{anthropictest.Error(529, "overloaded_error", "Overloaded", "Retry-After", "0.01"), ok}, requests: 2},
		{name: "rate limited then success", script: []anthropictest.Step{anthropictest.Error(429, "rate_limit_error", "slow down", "Retry-After", "0"), ok}, requests: 2},
		{name: "overloaded throughout", script: []anthropictest.Step{
			anthropictest.Error(529, "overloaded_error", "Overloaded"), anthropictest.Error(529, "overloaded_error", "Overloaded"), anthropictest.Error(529, "overloaded_error", "Overloaded"),
		}, requests: 3, err: "intelligence answered 529 Overloaded (after 3 attempts): overloaded_error: Overloaded"},
		{name: "x-should-retry false", script: []anthropictest.Step{anthropictest.Error(529, "overloaded_error", "Overloaded", "X-Should-Retry", "false")}, requests: 1, err: "overloaded_error"},
		{name: "x-should-retry true on 400", script: []anthropictest.Step{anthropictest.Error(400, "invalid_request_error", "try again", "X-Should-Retry", "true"), ok}, requests: 2},
		{name: "invalid request", script: []anthropictest.Step{anthropictest.Error(400, "invalid_request_error", "max_tokens: too large")}, requests: 1, err: "400 Bad Request: invalid_request_error: max_tokens: too large"},
		{name: "hang", script: []anthropictest.Step{anthropictest.Hang, anthropictest.Hang, anthropictest.Hang}, timeout: 50 * time.Millisecond, requests: 3, err: "no answer within the request timeout"},

		{name: "stream cut before text, then success", stream: true, script: []anthropictest.Step{anthropictest.Stream(beforeText...), ok}, requests: 2},
		{name: "stream cut after text", stream: true, script: []anthropictest.Step{anthropictest.Stream(afterText...)}, requests: 1, err: "the stream ended before message_stop"},
		{name: "stream stalls", stream: true, script: []anthropictest.Step{anthropictest.StreamThenHang(beforeText...), anthropictest.StreamThenHang(beforeText...), anthropictest.StreamThenHang(beforeText...)},
			timeout: 50 * time.Millisecond, requests: 3, err: "no answer within the request timeout"},
		{name: "overloaded event, then success", stream: true, script: []anthropictest.Step{anthropictest.Stream(append(beforeText[:2:2], errEvent("overloaded_error"))...), ok}, requests: 2},
		{name: "overloaded event after text", stream: true, script: []anthropictest.Step{anthropictest.Stream(append(afterText[:4:4], errEvent("overloaded_error"))...)}, requests: 1,
			err: "overloaded_error: scripted overloaded_error (not retried: part of the answer was already streamed)"},
		{name: "invalid request event", stream: true, script: []anthropictest.Step{anthropictest.Stream(append(beforeText[:1:1], errEvent("invalid_request_error"))...)}, requests: 1, err: "invalid_request_error"},
		{name: "garbage event", stream: true, script: []anthropictest.Step{anthropictest.Stream(beforeText[0], anthropictest.Event{Name: "content_block_delta", Data: "{nope"})}, requests: 1, err: "decode stream event"},
		{name: "delta for a block never started", stream: true, script: []anthropictest.Step{anthropictest.Stream(beforeText[0],
			anthropictest.Ev(map[string]any{"type": "content_block_delta", "index": 4, "delta": map[string]any{"type": "text_delta", "text": "x"}}))}, requests: 1, err: "which is not open"},
		{name: "garbage stream", stream: true, script: []anthropictest.Step{garbage, garbage, garbage}, requests: 3, err: "the stream ended before message_stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newMessagesServer(t, tc.script...)
			spec := anthropicSpec(srv.BaseURL())
			if tc.timeout > 0 {
				spec.RequestTimeout = api.Duration(tc.timeout)
			}
			m := newAnthropic(t, spec, "")
			req := &Request{Messages: []Message{{Role: RoleUser, Content: "go"}}}
			var chunks []string
			if tc.stream {
				req.OnText = func(s string) { chunks = append(chunks, s) }
			}
			resp, err := m.Complete(context.Background(), req)
			if n := len(srv.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			if tc.err == "" {
				if err != nil || resp.Content != "fine" {
					t.Fatalf("response %+v, err %v; want fine", resp, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want %q in it", err, tc.err)
			}
		})
	}
}

// TestAnthropicMalformedToolInput: a streamed tool_use whose input_json
// fragments do not make JSON is handed to the loop as is (which answers the
// model that the arguments are not JSON), not an error and not dropped.
func TestAnthropicMalformedToolInput(t *testing.T) {
	srv := newMessagesServer(t, anthropictest.Message("tool_use", anthropictest.Usage{Input: 3, Output: 1}, anthropictest.ToolUse("toolu_x", "files__read", `{"path": "/x`)))
	m := newAnthropic(t, anthropicSpec(srv.BaseURL()), "")
	resp, err := m.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "go"}}, OnText: func(string) {}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Finish != FinishToolCalls || len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Args) != `{"path": "/x` || json.Valid(resp.ToolCalls[0].Args) {
		t.Fatalf("response %+v", resp)
	}
}

// TestNewDialects: the dialect picks the client; another one is refused,
// naming the setting.
func TestNewDialects(t *testing.T) {
	for d, want := range map[string]string{"": "*intelligence.openAIModel", api.DialectOpenAI: "*intelligence.openAIModel", api.DialectAnthropic: "*intelligence.anthropicModel"} {
		m, err := New(api.Intelligence{Endpoint: "https://api.example/v1", Model: "m", Dialect: d}, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := typeName(onlyEndpoint(t, m)); got != want {
			t.Errorf("dialect %q: %s, want %s", d, got, want)
		}
	}
	// A fallback's dialect picks its own client.
	m, err := New(api.Intelligence{Endpoint: "https://api.example/v1", Model: "m",
		Fallbacks: []api.Intelligence{{Endpoint: "https://api.anthropic.example/v1", Model: "c", Dialect: api.DialectAnthropic}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if fm, ok := m.(*failoverModel); !ok || len(fm.eps) != 2 || typeName(fm.eps[1].model) != "*intelligence.anthropicModel" {
		t.Fatalf("New with an anthropic fallback gave %T %+v", m, m)
	}
	_, err = New(api.Intelligence{Endpoint: "https://api.example/v1", Model: "m", Dialect: "gemini"}, "")
	if err == nil || !strings.Contains(err.Error(), `dialect "gemini"`) || !strings.Contains(err.Error(), "--intelligence-dialect") {
		t.Fatalf("err %v, want the dialect and the flag named", err)
	}
	for _, spec := range []api.Intelligence{
		{Endpoint: "ftp://host/v1", Model: "m", Dialect: api.DialectAnthropic},
		{Endpoint: "https://host/v1", Dialect: api.DialectAnthropic},
		{Endpoint: "https://user:secret@host/v1", Model: "m", Dialect: api.DialectAnthropic},
		{Endpoint: "https://host/v1?x=1", Model: "m", Dialect: api.DialectAnthropic},
		{Endpoint: "https://host/v1", Model: "m", Dialect: api.DialectAnthropic, MaxOutputTokens: -1},
	} {
		if _, err := New(spec, ""); err == nil {
			t.Errorf("%+v accepted", spec)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("error leaks the URL's password: %v", err)
		}
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *openAIModel:
		return "*intelligence.openAIModel"
	case *anthropicModel:
		return "*intelligence.anthropicModel"
	}
	return "other"
}

// FuzzMessageStream feeds arbitrary bytes to the stream reader: it ends
// (an error or a message), and a message it returns converts to a known
// finish reason, non-negative usage, calls with ids, and content that is
// exactly the text handed to OnText.
func FuzzMessageStream(f *testing.F) {
	f.Add(anthropictest.Encode(anthropictest.StreamEvents("end_turn", anthropictest.Usage{Input: 3, Output: 2}, 2, anthropictest.Text("hello"))...))
	f.Add(anthropictest.Encode(anthropictest.StreamEvents("tool_use", anthropictest.Usage{Input: 3, Output: 2, CacheRead: 9}, 3, anthropictest.Text("a"), anthropictest.ToolUse("toolu_1", "t", `{"a":1}`))...))
	f.Add([]byte("event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"type\":\"message\",\"usage\":{\"input_tokens\":1}}}\r\n\r\n: comment\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n"))
	f.Add([]byte("data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"message_start\",\"message\":{}}\n\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"\",\"input\":{}}}\n\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"x\"}}\n\n"))
	known := map[FinishReason]bool{FinishStop: true, FinishToolCalls: true, FinishLength: true, FinishRefusal: true}
	f.Fuzz(func(t *testing.T, b []byte) {
		var text strings.Builder
		mr, err := readMessageStream(bytes.NewReader(b), func(s string) { text.WriteString(s) })
		if err != nil {
			return
		}
		r := convertMessage(mr, &Request{System: "s"})
		if !known[r.Finish] || r.Usage.TokensIn < 0 || r.Usage.TokensOut < 0 || r.Usage.CacheReadTokens < 0 || r.Usage.CacheWriteTokens < 0 {
			t.Fatalf("response %+v", r)
		}
		if r.Content != text.String() {
			t.Fatalf("content %q, OnText got %q", r.Content, text.String())
		}
		for _, tc := range r.ToolCalls {
			if tc.ID == "" || len(tc.Args) == 0 {
				t.Fatalf("tool call %+v", tc)
			}
		}
	})
}

// FuzzMessageAnswer feeds arbitrary bytes to the decoding of a whole answer
// and of an error body.
func FuzzMessageAnswer(f *testing.F) {
	f.Add([]byte(`{"type":"message","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"toolu_1","name":"t","input":{"a":1}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":1,"cache_read_input_tokens":7}}`))
	f.Add([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	f.Add([]byte(`{"type":"message","content":[{"type":"tool_use","input":null}],"usage":{"input_tokens":-4}}`))
	f.Add([]byte(`{"type":"message","usage":{"input_tokens":9223372036854775807,"output_tokens":9223372036854775807}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if msg := anthropicErrorMessage(b); len(msg) > 303 {
			t.Fatalf("error message of %d bytes", len(msg))
		}
		mr, err := decodeMessage(b)
		if err != nil {
			return
		}
		r := convertMessage(mr, &Request{System: "s"})
		if r.Usage.TokensIn < 0 || r.Usage.TokensOut < 0 {
			t.Fatalf("usage %+v", r.Usage)
		}
		for _, tc := range r.ToolCalls {
			if tc.ID == "" || len(tc.Args) == 0 {
				t.Fatalf("tool call %+v", tc)
			}
		}
	})
}

// TestAnthropicUnstreamedAnswerToOnText: a server that answers a streamed
// request with a whole message (a proxy that does not stream) is read as
// one, and its text reaches OnText once.
func TestAnthropicUnstreamedAnswerToOnText(t *testing.T) {
	whole := anthropictest.Message("end_turn", anthropictest.Usage{Input: 2, Output: 2}, anthropictest.Text("all at once"))
	srv := newMessagesServer(t, func(w http.ResponseWriter, r *anthropictest.Request) {
		r.Stream = false
		whole(w, r)
	})
	m := newAnthropic(t, anthropicSpec(srv.BaseURL()), "")
	var chunks []string
	resp, err := m.Complete(context.Background(), &Request{Messages: []Message{{Role: RoleUser, Content: "go"}}, OnText: func(s string) { chunks = append(chunks, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if !srv.Requests()[0].Stream || resp.Content != "all at once" || len(chunks) != 1 || chunks[0] != "all at once" {
		t.Fatalf("response %+v, chunks %q", resp, chunks)
	}
}
