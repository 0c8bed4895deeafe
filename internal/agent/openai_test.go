package agent

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// A subagent run against a scripted OpenAI-compatible server, Serve and the
// loop included: what reaches the server, retries and timeouts, and how each
// answer ends the run. The client's parts alone are tested in package
// intelligence.

func TestOpenAIPlainAnswer(t *testing.T) {
	f := newFakeLLM(t, answer("three words", 120, 7))
	p := llmPayload(f)
	p.Tools = []api.ToolSpec{{Name: "files/read", Description: "read a file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}
	run := runChild(t, p, "sk-test-key", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	wantUsage(t, run, 120, 7, 1)
	if got := run.result.Distillate.Text(); got != "three words" {
		t.Fatalf("distillate = %q", got)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.Body.Model != "test-model" {
		t.Errorf("request to %s for model %q", r.Path, r.Body.Model)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test-key" {
		t.Errorf("Authorization = %q", got)
	}
	msgs := r.Body.Messages
	if len(msgs) != 2 || msgs[0].Role != "system" || msgs[1].Role != "user" {
		t.Fatalf("messages = %+v", msgs)
	}
	for _, want := range []string{"first user message states it", "plain text", "read files first"} {
		if !strings.Contains(msgs[0].text(), want) {
			t.Errorf("system prompt lacks %q:\n%s", want, msgs[0].text())
		}
	}
	if strings.Contains(msgs[0].text(), "count the words in the seed") {
		t.Errorf("the system prompt holds the objective:\n%s", msgs[0].text())
	}
	if u := msgs[1].text(); u != "count the words in the seed\n\n[text]\nalpha beta gamma" {
		t.Errorf("user turn is not the objective and the seed: %q", u)
	}
	var offered []string
	for _, tool := range r.Body.Tools {
		offered = append(offered, tool.Function.Name)
	}
	if !strings.Contains(strings.Join(offered, ","), "files__read") {
		t.Errorf("tools offered = %v, want files__read among them", offered)
	}
}

func TestOpenAINoKeyNoAuthorization(t *testing.T) {
	f := newFakeLLM(t, answer("ok", 1, 1))
	run := runChild(t, llmPayload(f), "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	if h := f.requests()[0].Header.Get("Authorization"); h != "" {
		t.Fatalf("Authorization sent without a key: %q", h)
	}
}

func TestOpenAIToolCall(t *testing.T) {
	f := newFakeLLM(t,
		toolCalls(50, 10, callSpec{"files__read", `{"path":"/x"}`}),
		answer("the file says hello", 80, 6))
	p := llmPayload(f)
	p.Tools = []api.ToolSpec{{Name: "files/read", Description: "read a file"}}
	run := runChild(t, p, "", superEnd{tool: func(c api.ToolCall) api.ToolResult {
		return api.TextResult("hello from "+string(c.Args), false)
	}})
	wantStatus(t, run, api.StatusCompleted, "")
	wantUsage(t, run, 130, 16, 2)
	if len(run.toolCalls) != 1 || run.toolCalls[0].Tool != "files/read" || canonicalJSON(run.toolCalls[0].Args) != `{"path":"/x"}` {
		t.Fatalf("supervisor saw tool calls %+v, want one files/read {path:/x}", run.toolCalls)
	}
	second := f.requests()[1].Body.Messages
	asst, tool := second[len(second)-2], second[len(second)-1]
	if asst.Role != "assistant" || len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Function.Name != "files__read" {
		t.Fatalf("assistant turn = %+v", asst)
	}
	if tool.Role != "tool" || tool.ToolCallID != asst.ToolCalls[0].ID || tool.text() != `hello from {"path":"/x"}` {
		t.Fatalf("tool turn = %+v", tool)
	}
}

// TestOpenAISelfToolSpawn: the model calls subagent_spawn; the control channel
// carries subagent.spawn, and the supervisor's answer (a child's result) flows
// back into the conversation.
func TestOpenAISelfToolSpawn(t *testing.T) {
	f := newFakeLLM(t,
		toolCalls(40, 20, callSpec{"subagent_spawn", `{"contract":{"objective":"count words","output_format":{"kind":"text"}}}`}),
		answer("the child counted 3 words", 90, 8))
	p := llmPayload(f)
	if !offers(offeredTools(p), api.ToolSpawn) {
		p.Tools = append(p.Tools, api.ToolSpec{Name: api.ToolSpawn, Description: "spawn a subagent"})
	}
	childResult, _ := json.Marshal(api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("3 words"), Usage: api.Usage{TokensIn: 5, TokensOut: 2, Steps: 1}})
	run := runChild(t, p, "", superEnd{tool: func(c api.ToolCall) api.ToolResult {
		return api.TextResult(string(childResult), false)
	}})
	wantStatus(t, run, api.StatusCompleted, "")
	wantUsage(t, run, 130, 28, 2)
	if len(run.toolCalls) != 1 || run.toolCalls[0].Tool != "subagent.spawn" {
		t.Fatalf("supervisor saw %+v, want one subagent.spawn", run.toolCalls)
	}
	msgs := f.requests()[1].Body.Messages
	if last := msgs[len(msgs)-1]; last.Role != "tool" || !strings.Contains(last.text(), `"3 words"`) {
		t.Fatalf("the child's result did not flow back: %+v", last)
	}
}

func TestOpenAIRefusal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		step   llmStep
		detail string
	}{
		{"refusal message", completion("", "I can't help with that.", "stop", 30, 6), "I can't help with that."},
		{"content filter", completion("", "", "content_filter", 30, 6), "content_filter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeLLM(t, tc.step)
			run := runChild(t, llmPayload(f), "", superEnd{})
			wantStatus(t, run, api.StatusRefused, "")
			wantUsage(t, run, 30, 6, 1)
			if !strings.Contains(run.result.Detail, tc.detail) {
				t.Fatalf("detail = %q, want %q in it", run.result.Detail, tc.detail)
			}
		})
	}
}

func TestOpenAILoopDetected(t *testing.T) {
	for _, tc := range []struct {
		repeats   int
		wantCalls int
	}{{0, 2}, {2, 1}, {4, 3}} {
		same := toolCalls(10, 3, callSpec{"files__read", `{"path": "/x", "n": 1}`})
		// Key order and spacing differ; the call is the same.
		reordered := toolCalls(10, 3, callSpec{"files__read", `{"n":1,"path":"/x"}`})
		f := newFakeLLM(t, same, reordered, same, reordered)
		p := llmPayload(f)
		p.Tools = []api.ToolSpec{{Name: "files/read"}}
		p.Limits.MaxRepeats = tc.repeats
		run := runChild(t, p, "", superEnd{tool: func(api.ToolCall) api.ToolResult { return api.TextResult("same again", false) }})
		wantStatus(t, run, api.StatusLoopDetected, "")
		steps := tc.wantCalls + 1
		wantUsage(t, run, int64(10*steps), int64(3*steps), steps)
		if len(run.toolCalls) != tc.wantCalls {
			t.Fatalf("max_repeats %d: %d tool calls reached the supervisor, want %d", tc.repeats, len(run.toolCalls), tc.wantCalls)
		}
	}
}

func TestOpenAIDifferentArgumentsAreNoLoop(t *testing.T) {
	f := newFakeLLM(t,
		toolCalls(1, 1, callSpec{"files__read", `{"path":"/a"}`}),
		toolCalls(1, 1, callSpec{"files__read", `{"path":"/b"}`}),
		toolCalls(1, 1, callSpec{"files__read", `{"path":"/a"}`}),
		answer("done", 1, 1))
	p := llmPayload(f)
	p.Tools = []api.ToolSpec{{Name: "files/read"}}
	p.Limits.MaxRepeats = 2
	run := runChild(t, p, "", superEnd{tool: func(api.ToolCall) api.ToolResult { return api.TextResult("x", false) }})
	wantStatus(t, run, api.StatusCompleted, "")
}

const countSchema = `{"type":"object","required":["count"],"properties":{"count":{"type":"integer"}},"additionalProperties":false}`

func TestOpenAISchemaMismatchRepaired(t *testing.T) {
	f := newFakeLLM(t, answer(`{"count":"three"}`, 40, 5), answer("```json\n{\"count\": 3}\n```", 60, 5))
	p := llmPayload(f)
	p.Contract.OutputFormat = api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(countSchema)}
	run := runChild(t, p, "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	wantUsage(t, run, 100, 10, 2)
	if got := string(run.result.Distillate.Inline); got != `{"count":3}` {
		t.Fatalf("distillate = %s, want the JSON value", got)
	}
	sys := f.requests()[0].Body.Messages[0].text()
	if !strings.Contains(sys, `"required":["count"]`) {
		t.Errorf("the system prompt lacks the schema:\n%s", sys)
	}
	msgs := f.requests()[1].Body.Messages
	if last := msgs[len(msgs)-1]; last.Role != "user" || !strings.Contains(last.text(), "does not satisfy") {
		t.Fatalf("no repair turn: %+v", last)
	}
}

func TestOpenAISchemaMismatchReported(t *testing.T) {
	f := newFakeLLM(t, answer(`{"count":"three"}`, 40, 5), answer(`{"count":"still three"}`, 60, 5))
	p := llmPayload(f)
	p.Contract.OutputFormat = api.OutputFormat{Kind: api.FormatJSON, Schema: json.RawMessage(countSchema)}
	run := runChild(t, p, "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, api.CauseSchemaMismatch)
	wantUsage(t, run, 100, 10, 2)
	if !strings.Contains(run.result.Detail, "schema") || !strings.Contains(run.result.Detail, "count") {
		t.Fatalf("detail = %q", run.result.Detail)
	}
	if got := string(run.result.Distillate.Inline); got != `{"count":"still three"}` {
		t.Fatalf("distillate = %s, want the last answer intact", got)
	}
	if code := api.ExitCode(run.result); code != api.ExitOK {
		t.Fatalf("exit code %d: a mismatch keeps the status", code)
	}
}

func TestOpenAIRetryAfter429(t *testing.T) {
	f := newFakeLLM(t, httpError(http.StatusTooManyRequests, "Retry-After", "1"), answer("after the wait", 20, 4))
	run := runChild(t, llmPayload(f), "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	wantUsage(t, run, 20, 4, 1)
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	// The configured backoff is 10ms; only Retry-After explains a wait of a second.
	if gap := reqs[1].At.Sub(reqs[0].At); gap < 900*time.Millisecond {
		t.Fatalf("retried after %s, want Retry-After's 1s honoured", gap)
	}
}

func TestOpenAI5xxThenSuccess(t *testing.T) {
	f := newFakeLLM(t, httpError(http.StatusInternalServerError), httpError(http.StatusBadGateway), answer("third time", 20, 4))
	run := runChild(t, llmPayload(f), "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	wantUsage(t, run, 20, 4, 1)
	if n := len(f.requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
}

func TestOpenAIRetriesExhausted(t *testing.T) {
	f := newFakeLLM(t, httpError(500), httpError(500), httpError(500))
	run := runChild(t, llmPayload(f), "", superEnd{})
	wantStatus(t, run, api.StatusCrashed, "")
	if !strings.Contains(run.result.Detail, "500") || !strings.Contains(run.result.Detail, "3 attempts") {
		t.Fatalf("detail = %q", run.result.Detail)
	}
	if n := len(f.requests()); n != 3 {
		t.Fatalf("%d requests, want 3 (2 retries)", n)
	}
}

func TestOpenAINotRetried(t *testing.T) {
	f := newFakeLLM(t, httpError(http.StatusUnauthorized))
	run := runChild(t, llmPayload(f), "", superEnd{})
	wantStatus(t, run, api.StatusCrashed, "")
	if !strings.Contains(run.result.Detail, "401") {
		t.Fatalf("detail = %q", run.result.Detail)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("a 401 was retried: %d requests", n)
	}
}

func TestOpenAIHangPastDeadline(t *testing.T) {
	f := newFakeLLM(t, hang)
	p := llmPayload(f)
	p.Limits.Deadline = api.Duration(300 * time.Millisecond)
	run := runChild(t, p, "", superEnd{})
	wantStatus(t, run, api.StatusDeadline, "")
	if u := run.eventUsage(); u.Tokens() != 0 || len(run.events) != 0 {
		t.Fatalf("usage reported for a call that never answered: %+v", run.events)
	}
}

func TestOpenAIRequestTimeoutRetried(t *testing.T) {
	f := newFakeLLM(t, hang, hangInBody, answer("third attempt", 9, 2))
	p := llmPayload(f)
	p.Intelligence.RequestTimeout = api.Duration(200 * time.Millisecond)
	run := runChild(t, p, "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	wantUsage(t, run, 9, 2, 1)
	if n := len(f.requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}

	// No retries left: the timeout is the reported failure.
	f = newFakeLLM(t, hang)
	p = llmPayload(f)
	p.Intelligence.RequestTimeout = api.Duration(200 * time.Millisecond)
	p.Intelligence.Retries = intPtr(0)
	run = runChild(t, p, "", superEnd{})
	wantStatus(t, run, api.StatusCrashed, "")
	if !strings.Contains(run.result.Detail, "no answer within the request timeout of 200ms") {
		t.Fatalf("detail = %q", run.result.Detail)
	}
}

// hangInBody sends the status and part of the body, then stalls until the
// client goes away.
func hangInBody(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, `{"choices":[{"message":{"content":"trunc`)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func TestOpenAIUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := llmPayload(newFakeLLM(t))
	p.Intelligence.Endpoint = "http://" + addr + "/v1"
	run := runChild(t, p, "", superEnd{})
	wantStatus(t, run, api.StatusCrashed, api.CauseIntelligenceUnreachable)
	if code := api.ExitCode(run.result); code != api.ExitIntelligenceUnreachable {
		t.Fatalf("exit code %d, want 4", code)
	}
}

func TestOpenAILengthAndStall(t *testing.T) {
	f := newFakeLLM(t, completion("a truncated ans", "", "length", 10, 4))
	run := runChild(t, llmPayload(f), "", superEnd{})
	wantStatus(t, run, api.StatusExhaustedTokens, "")
	if run.result.Distillate.Text() != "a truncated ans" {
		t.Fatalf("partial distillate = %q", run.result.Distillate.Text())
	}

	f = newFakeLLM(t, answer("", 10, 0), answer("  ", 10, 0))
	run = runChild(t, llmPayload(f), "", superEnd{})
	wantStatus(t, run, api.StatusStalled, "")
	wantUsage(t, run, 20, 0, 2)
}

func TestOpenAIOverDistillateBudget(t *testing.T) {
	long := strings.Repeat("word ", 1000) // 5000 characters
	f := newFakeLLM(t, answer(long, 30, 1250))
	p := llmPayload(f)
	p.Limits.DistillateBudget = 600
	run := runChild(t, p, "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	wantUsage(t, run, 30, 1250, 1)
	ref := run.result.Distillate.Reference
	if ref == nil {
		t.Fatalf("distillate inline (%d bytes), want a reference", len(run.result.Distillate.Inline))
	}
	if _, ok := api.ParseBlobURI(ref.URI); !ok {
		t.Fatalf("uri %q", ref.URI)
	}
	if n := utf8.RuneCountInString(ref.Summary); n > 600 || !strings.HasPrefix(ref.Summary, "word word") || !strings.Contains(ref.Summary, "5000 characters") {
		t.Fatalf("summary (%d chars) = %q", n, ref.Summary)
	}
	if len(run.blobs) != 1 || run.blobs[0].Content != long || !strings.HasPrefix(run.blobs[0].MediaType, "text/plain") {
		t.Fatalf("blob/put frames = %d, want one with the whole answer", len(run.blobs))
	}

	// The store refuses: the distillate is truncated inline, the status kept.
	f = newFakeLLM(t, answer(long, 30, 1250))
	p = llmPayload(f)
	p.Limits.DistillateBudget = 600
	run = runChild(t, p, "", superEnd{blobErr: "supervisor: blob store full"})
	wantStatus(t, run, api.StatusCompleted, "")
	if run.result.Distillate.Reference != nil {
		t.Fatal("a reference without a stored blob")
	}
	if n := utf8.RuneCountInString(run.result.Distillate.Text()); n > 600 || !strings.Contains(run.result.Detail, "blob store full") {
		t.Fatalf("inline %d chars, detail %q", n, run.result.Detail)
	}
}

// TestOpenAIOtherServersErrors: error answers that are not OpenAI's shape
// (Ollama's {"error":"..."}, a bare {"message":..}, a proxy's HTML page) keep
// their status, so they are retried or reported with the provider's message.
func TestOpenAIOtherServersErrors(t *testing.T) {
	f := newFakeLLM(t,
		rawAnswer(http.StatusServiceUnavailable, "application/json", `{"error":"server busy"}`),
		rawAnswer(http.StatusBadGateway, "text/html", `<html><body>502 Bad Gateway</body></html>`),
		answer("after two odd errors", 5, 2))
	run := runChild(t, llmPayload(f), "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	wantUsage(t, run, 5, 2, 1)
	if n := len(f.requests()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"error":"model \"nope\" not found, try pulling it first"}`, `model "nope" not found`},
		{`{"message":"unknown model nope"}`, "unknown model nope"},
		{`{"error":{"message":"The model nope does not exist","type":"invalid_request_error"}}`, "The model nope does not exist"},
	} {
		f := newFakeLLM(t, rawAnswer(http.StatusNotFound, "application/json", tc.body))
		run := runChild(t, llmPayload(f), "", superEnd{})
		wantStatus(t, run, api.StatusCrashed, "")
		if !strings.Contains(run.result.Detail, "404") || !strings.Contains(run.result.Detail, tc.want) {
			t.Errorf("%s: detail = %q, want 404 and %q", tc.body, run.result.Detail, tc.want)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("%s: a 404 was retried: %d requests", tc.body, n)
		}
	}
}

// TestOpenAIOtherServersAnswers: content as an array of parts, and a JSON
// answer under another media type, are read as OpenAI's.
func TestOpenAIOtherServersAnswers(t *testing.T) {
	parts := `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":[` +
		`{"type":"text","text":"two "},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"parts"}]}}],` +
		`"usage":{"prompt_tokens":7,"completion_tokens":3}}`
	for _, mediaType := range []string{"application/json", "text/plain; charset=utf-8", ""} {
		f := newFakeLLM(t, rawAnswer(http.StatusOK, mediaType, parts))
		run := runChild(t, llmPayload(f), "", superEnd{})
		wantStatus(t, run, api.StatusCompleted, "")
		wantUsage(t, run, 7, 3, 1)
		if got := run.result.Distillate.Text(); got != "two parts" {
			t.Errorf("%q: distillate = %q", mediaType, got)
		}
	}
}

// TestOpenAIToolSchemaAsWritten: a tool's schema reaches the server with its
// numbers intact (not rounded through float64).
func TestOpenAIToolSchemaAsWritten(t *testing.T) {
	f := newFakeLLM(t, answer("ok", 1, 1))
	p := llmPayload(f)
	p.Tools = []api.ToolSpec{{Name: "files/read", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740993,"multipleOf":0.1}}}`)}}
	run := runChild(t, p, "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	raw := string(f.requests()[0].Raw)
	if !strings.Contains(raw, `"maximum":9007199254740993`) || !strings.Contains(raw, `"multipleOf":0.1`) {
		t.Fatalf("schema numbers changed in the request: %s", raw)
	}
}

// TestOpenAIIgnoresOpenAIEnv: the OPENAI_* variables the SDK's default client
// reads do not redirect or authenticate agentd's requests.
func TestOpenAIIgnoresOpenAIEnv(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_API_KEY", "sk-from-openai-env")
	f := newFakeLLM(t, answer("ok", 1, 1))
	run := runChild(t, llmPayload(f), "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	if h := f.requests()[0].Header.Get("Authorization"); h != "" {
		t.Fatalf("Authorization = %q from OPENAI_API_KEY", h)
	}
}

// A model request that fails is logged: each retry at info and the failure
// at warn, with the endpoint and the error, never the key.
func TestOpenAIFailureLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	for _, tc := range []struct {
		name     string
		endpoint func(f *fakeLLM) string
		want     string
		cause    string
	}{
		{"5xx", func(f *fakeLLM) string { return f.endpoint() }, "500", ""},
		{"unreachable", func(*fakeLLM) string { return down }, "connection refused", api.CauseIntelligenceUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeLLM(t, httpError(500), httpError(500), httpError(500))
			p := llmPayload(f)
			p.Intelligence.Endpoint = tc.endpoint(f)
			var stderr testkit.Buffer
			run := runChild(t, p, "sk-secret-4711", superEnd{stderr: &stderr})
			wantStatus(t, run, api.StatusCrashed, tc.cause)
			var retries, failures int
			for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
				var rec struct{ Level, Msg, Endpoint, Err string }
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("not a JSON log line: %q", line)
				}
				if strings.Contains(line, "sk-secret") {
					t.Errorf("the key is logged: %s", line)
				}
				switch rec.Msg {
				case "model request failed: retrying":
					retries++
				case "model request failed":
					failures++
					if rec.Level != "WARN" {
						t.Errorf("failure logged at %s", rec.Level)
					}
				default:
					continue
				}
				if rec.Endpoint != p.Intelligence.Endpoint || !strings.Contains(rec.Err, tc.want) {
					t.Errorf("endpoint %q, err %q; want %q, %q", rec.Endpoint, rec.Err, p.Intelligence.Endpoint, tc.want)
				}
			}
			if retries != 2 || failures != 1 {
				t.Errorf("%d retry lines, %d failure lines; want 2 and 1:\n%s", retries, failures, stderr.String())
			}
		})
	}
}
