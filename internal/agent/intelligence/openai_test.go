package intelligence

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// The OpenAI-compatible client's parts, unit by unit. The subagent's runs
// against a scripted Chat Completions server (retries, timeouts, other
// servers' shapes, the loop's stop conditions) are package agent's
// openai_test.go.

func intPtr(n int) *int { return &n }

func TestNewRefusesBadSpecs(t *testing.T) {
	for _, spec := range []api.Intelligence{
		{Endpoint: "builtin:nope"},
		{Endpoint: "ftp://host/v1", Model: "m"},
		{Endpoint: "http://", Model: "m"},
		{Endpoint: "http://127.0.0.1:1/v1"}, // no model
		{Endpoint: "http://user:secret@127.0.0.1:1/v1", Model: "m"},
		{Endpoint: "http://127.0.0.1:1/v1", Model: "m", Retries: intPtr(-1)},
	} {
		if _, err := New(spec, ""); err == nil {
			t.Errorf("%+v accepted", spec)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("error leaks the URL's password: %v", err)
		}
	}
	if err := Check(api.Intelligence{Endpoint: "https://gateway.example/v1", Model: "gpt-x"}); err != nil {
		t.Fatal(err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{http.Header{"Retry-After": {"0.25"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After-Ms": {"150"}, "Retry-After": {"9"}}, 150 * time.Millisecond, true},
		{http.Header{"Retry-After": {now.Add(3 * time.Second).Format(http.TimeFormat)}}, 3 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0, true},
		{http.Header{"Retry-After": {"-1"}}, 0, false},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{"Retry-After": {"1e30"}}, 0, false},
		{http.Header{}, 0, false},
	} {
		got, ok := parseRetryAfter(tc.h, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%v: %s %v, want %s %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	f.Add("120", "")
	f.Add("", "250")
	f.Add("Wed, 21 Oct 2015 07:28:00 GMT", "")
	f.Fuzz(func(t *testing.T, ra, ms string) {
		h := http.Header{}
		h.Set("Retry-After", ra)
		h.Set("Retry-After-Ms", ms)
		d, ok := parseRetryAfter(h, time.Now())
		if ok && (d < 0 || d > 24*time.Hour) {
			t.Fatalf("Retry-After %q / %q gave %s", ra, ms, d)
		}
	})
}

// FuzzChatResponse feeds arbitrary bytes to the decoding of an endpoint's
// answer: the success body and the error body.
func FuzzChatResponse(f *testing.F) {
	f.Add([]byte(`{"choices":[{"finish_reason":"stop","message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`))
	f.Add([]byte(`{"choices":[{"message":{"content":[{"type":"text","text":"a"}],"tool_calls":[{"function":{"name":"t","arguments":"{"}}]}}]}`))
	f.Add([]byte(`{"error":{"message":"model not found"}}`))
	f.Add([]byte(`{"error":"overloaded"}`))
	f.Add([]byte(`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":-5,"completion_tokens":2}}`))
	known := map[FinishReason]bool{FinishStop: true, FinishToolCalls: true, FinishLength: true, FinishRefusal: true, FinishContentFilter: true}
	f.Fuzz(func(t *testing.T, b []byte) {
		if msg := errorMessage(b); len(msg) > 303 {
			t.Fatalf("error message of %d bytes", len(msg))
		}
		var cr chatResponse
		if json.Unmarshal(b, &cr) != nil {
			return
		}
		r, err := convertCompletion(&cr, &Request{System: "s"})
		if err != nil {
			return
		}
		if !known[r.Finish] || r.Usage.TokensIn < 0 || r.Usage.TokensOut < 0 {
			t.Fatalf("response %+v", r)
		}
		for _, tc := range r.ToolCalls {
			if tc.ID == "" {
				t.Fatalf("tool call without an id: %+v", tc)
			}
		}
	})
}

func TestLimitedBody(t *testing.T) {
	for _, tc := range []struct {
		size int
		ok   bool
	}{{0, true}, {maxResponseBytes, true}, {maxResponseBytes + 1, false}} {
		b := &limitedBody{rc: io.NopCloser(io.LimitReader(zeros{}, int64(tc.size))), left: maxResponseBytes}
		n, err := io.Copy(io.Discard, b)
		if (err == nil) != tc.ok || (tc.ok && n != int64(tc.size)) {
			t.Errorf("%d bytes: read %d, err %v", tc.size, n, err)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestConvertCustomToolCall: a call to one of OpenAI's custom tools (free-form
// input) becomes a tool call whose arguments are {"input": ...}; a call
// without an id gets one.
func TestConvertCustomToolCall(t *testing.T) {
	var cr chatResponse
	body := `{"choices":[{"finish_reason":"tool_calls","message":{"content":null,"tool_calls":[` +
		`{"id":"c1","type":"custom","custom":{"name":"grep","input":"a \"b\""}},` +
		`{"type":"function","function":{"name":"files__read","arguments":"{\"path\":\"/x\"}"}}]}}],` +
		`"usage":{"prompt_tokens":4,"completion_tokens":2}}`
	if err := json.Unmarshal([]byte(body), &cr); err != nil {
		t.Fatal(err)
	}
	r, err := convertCompletion(&cr, &Request{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Finish != FinishToolCalls || len(r.ToolCalls) != 2 || r.Usage.TokensIn != 4 || r.Usage.TokensOut != 2 {
		t.Fatalf("response %+v", r)
	}
	if c := r.ToolCalls[0]; c.ID != "c1" || c.Name != "grep" || string(c.Args) != `{"input":"a \"b\""}` {
		t.Errorf("custom call %+v (args %s)", c, c.Args)
	}
	if c := r.ToolCalls[1]; c.ID != "call_1" || c.Name != "files__read" || string(c.Args) != `{"path":"/x"}` {
		t.Errorf("function call %+v (args %s)", c, c.Args)
	}
}
