package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
)

// llmServer is an OpenAI-compatible Chat Completions server scripted per
// request, in this test process; agentd's children call it over loopback.
type llmServer struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex // guards script, headers
	script  []http.HandlerFunc
	headers []http.Header
}

func newLLMServer(t *testing.T, script ...http.HandlerFunc) *llmServer {
	s := &llmServer{t: t, script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		n := len(s.headers)
		s.headers = append(s.headers, r.Header.Clone())
		var h http.HandlerFunc
		if n < len(s.script) {
			h = s.script[n]
		}
		s.mu.Unlock()
		if r.URL.Path != "/v1/chat/completions" {
			t.Errorf("request to %s", r.URL.Path)
		}
		if h == nil {
			t.Errorf("unscripted request %d", n+1)
			http.Error(w, `{"error":{"message":"unscripted"}}`, 500)
			return
		}
		h(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *llmServer) url() string { return s.srv.URL + "/v1" }

func (s *llmServer) requests() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

func chat(content, refusal, finish string, in, out int, toolCall string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		msg := map[string]any{"role": "assistant", "content": content}
		if refusal != "" {
			msg["refusal"] = refusal
		}
		if toolCall != "" {
			msg["tool_calls"] = []any{map[string]any{"id": "c1", "type": "function",
				"function": map[string]any{"name": toolCall, "arguments": `{"q":"same"}`}}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "x", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
		})
	}
}

func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":{"message":"scripted %d"}}`, code)
	}
}

func hangs(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// runOnceEnv runs `agentd run` and returns its stdout, stderr and exit code.
func runOnceEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := agentdCommand(t, append([]string{"run"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestRunAgainstHTTPIntelligence runs the real binary (supervisor plus a
// re-exec'd child) against a scripted endpoint, once per exit code.
func TestRunAgainstHTTPIntelligence(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String() + "/v1"
	closed.Close()
	fast := []string{"--model", "test-model", "--intelligence-backoff", "10ms", "--instruction", "answer the question"}

	for _, tc := range []struct {
		name   string
		script []http.HandlerFunc
		url    string // default: the scripted server
		args   []string
		code   int
		stdout string
	}{
		{name: "completed", script: []http.HandlerFunc{chat("forty-two", "", "stop", 10, 2, "")}, code: 0, stdout: "forty-two"},
		{name: "500 then success", script: []http.HandlerFunc{status(500), status(503), chat("after retries", "", "stop", 10, 2, "")}, code: 0, stdout: "after retries"},
		{name: "refused", script: []http.HandlerFunc{chat("", "I won't do that.", "stop", 10, 2, "")}, code: 5},
		{name: "loop detected", script: []http.HandlerFunc{
			chat("looking", "", "tool_calls", 10, 2, "search"),
			chat("looking", "", "tool_calls", 10, 2, "search"),
			chat("looking", "", "tool_calls", 10, 2, "search"),
		}, code: 3, stdout: "looking"},
		{name: "deadline", script: []http.HandlerFunc{hangs}, args: []string{"--deadline", "500ms"}, code: 124},
		{name: "unreachable", url: closedURL, args: []string{"--intelligence-retries", "1"}, code: 4},
		// Over the budget: stored with the supervisor, and a one-shot run prints it whole.
		{name: "over budget", script: []http.HandlerFunc{chat(strings.Repeat("0123456789", 50), "", "stop", 10, 130, "")},
			args: []string{"--distillate-budget", "200"}, code: 0, stdout: strings.Repeat("0123456789", 50)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			llm := newLLMServer(t, tc.script...)
			url := tc.url
			if url == "" {
				url = llm.url()
			}
			args := append(append([]string{"--intelligence", url}, fast...), tc.args...)
			stdout, stderr, code := runOnceEnv(t, []string{"AGENT_INTELLIGENCE_KEY=sk-from-env"}, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			if tc.stdout != "" && strings.TrimSpace(stdout) != tc.stdout {
				t.Fatalf("stdout = %q, want %q", stdout, tc.stdout)
			}
			if reqs := llm.requests(); len(reqs) != len(tc.script) {
				t.Fatalf("%d requests, want %d", len(reqs), len(tc.script))
			} else if len(reqs) > 0 && reqs[0].Get("Authorization") != "Bearer sk-from-env" {
				t.Fatalf("Authorization = %q", reqs[0].Get("Authorization"))
			}
		})
	}
}

func TestRunKeyFromFile(t *testing.T) {
	t.Parallel()
	llm := newLLMServer(t, chat("ok", "", "stop", 1, 1, ""))
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("sk-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runOnceEnv(t, nil, "--intelligence", llm.url(), "--model", "m", "--intelligence-key-file", keyFile, "--instruction", "x")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := llm.requests()[0].Get("Authorization"); got != "Bearer sk-from-file" {
		t.Fatalf("Authorization = %q", got)
	}
}

func TestIntelligenceBadConfigExits2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"run", "--intelligence", "http://127.0.0.1:9/v1", "--instruction", "x"}, "--model"},
		{[]string{"run", "--intelligence", "ftp://host/v1", "--model", "m", "--instruction", "x"}, "--intelligence"},
		{[]string{"run", "--max-repeats", "1", "--instruction", "x"}, "--max-repeats"},
		{[]string{"run", "--distillate-budget", "10", "--instruction", "x"}, "--distillate-budget"},
		{[]string{"run", "--intelligence-retries", "-1", "--instruction", "x"}, "--intelligence-retries"},
		{[]string{"run", "--intelligence-timeout", "0s", "--instruction", "x"}, "--intelligence-timeout"},
	} {
		wantUsageError(t, "", tc.name, tc.args...)
	}
}

// TestServeStoresLargeDistillate: an answer over the distillate budget comes
// back as a file part whose URL the same server serves, plus a summary; the
// task's usage is what the endpoint reported.
func TestServeStoresLargeDistillate(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("line of a long report\n", 100) // 2200 characters
	llm := newLLMServer(t, chat(long, "", "stop", 321, 555, ""))
	s := startService(t, "--intelligence", llm.url(), "--model", "test-model", "--distillate-budget", "300")
	c := s.client(t)
	res, err := c.SendMessage(context.Background(), textMessage("write the long report"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 {
		t.Fatalf("task %s with %d artifacts", task.Status.State, len(task.Artifacts))
	}
	parts := task.Artifacts[0].Parts
	if len(parts) != 2 {
		t.Fatalf("parts = %+v", parts)
	}
	file, ok := parts[0].(a2a.FilePart)
	if !ok {
		t.Fatalf("first part is %T, want a file part", parts[0])
	}
	uri := file.File.(a2a.FileURI).URI
	if !strings.HasPrefix(uri, s.url+"/blobs/") {
		t.Fatalf("file uri %q is not on the service %s", uri, s.url)
	}
	summary := parts[1].(a2a.TextPart).Text
	if len([]rune(summary)) > 300 || !strings.HasPrefix(summary, "line of a long report") {
		t.Fatalf("summary = %q", summary)
	}
	resp, err := http.Get(uri)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != long || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s = %d %q (%d bytes)", uri, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	usage, _ := task.Metadata["agentd/usage"].(map[string]any)
	if usage["tokens_in"] != float64(321) || usage["tokens_out"] != float64(555) || usage["steps"] != float64(1) {
		t.Fatalf("task usage = %v, want the endpoint's 321/555 in one step", task.Metadata["agentd/usage"])
	}
}
