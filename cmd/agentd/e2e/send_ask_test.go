package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli/clitest"
)

// Issue 32.6: `agentd send` answers the questions of the task it sent: the
// next --answer, else a line typed on the terminal; with neither it prints
// the question and exits api.ExitInputRequired, and `send --task ID ANSWER`
// answers it later.

// runSend runs `agentd send --to URL args...` with stdin not a terminal
// (/dev/null) and returns its stdout, stderr and exit code.
func runSend(t *testing.T, url string, args ...string) (string, string, int) {
	t.Helper()
	cmd := agentdCommand(t, append([]string{"send", "--to", url, "--timeout", "60s"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	t.Fatalf("send %v: %v", args, err)
	return "", "", -1
}

// twoQuestions asks the caller twice at the root, then once at a child
// the root passes up: three answers, in order.
const twoQuestions = `[depth 0]
ask "Which color?" choices=red,blue
ask "Which size?"
spawn sync "child"
pass 1
await
answer "root: size {answer}, {results}"
[depth 1]
ask "Which shape?" choices=round,square
answer "child got {answer}"
`

// --answer answers the questions in order, blocking and --stream: each
// question is shown on stderr with its asker and choices, and the task
// completes with the answers in its history, in order.
func TestSendAnswers(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, twoQuestions))
	c := s.client(t)
	for _, mode := range [][]string{nil, {"--stream"}} {
		args := append(mode, "--answer", "blue", "--answer", "large", "--answer", "square", "pick")
		out, errOut, code := runSend(t, s.url, args...)
		if code != 0 || !strings.Contains(out, ": completed") || !strings.Contains(out, "root: size square, child got square") {
			t.Fatalf("send %v: exit %d\nstdout:\n%s\nstderr:\n%s", mode, code, out, errOut)
		}
		for _, want := range []string{
			": input-required (Which color?)\n  asked by: subagent 0\n  choices: red, blue\nanswer (--answer): blue\n",
			": input-required (Which size?)\n  asked by: subagent 0\nanswer (--answer): large\n",
			": input-required (Which shape?)\n  asked by: subagent 0.1\n  choices: round, square\nanswer (--answer): square\n",
		} {
			if !strings.Contains(errOut, want) {
				t.Errorf("send %v: stderr lacks %q:\n%s", mode, want, errOut)
			}
		}
		id := regexp.MustCompile(`task (\S+): completed`).FindStringSubmatch(out)
		if id == nil {
			t.Fatalf("no task id in %q", out)
		}
		task, err := c.GetTask(context.Background(), &a2a.TaskQueryParams{ID: a2a.TaskID(id[1])})
		if err != nil {
			t.Fatal(err)
		}
		var said []string
		for _, m := range task.History {
			if m.Role == a2a.MessageRoleUser {
				said = append(said, m.Parts[0].(a2a.TextPart).Text)
			}
		}
		if strings.Join(said, ",") != "pick,blue,large,square" {
			t.Errorf("send %v: the caller's messages in the history: %q, want pick, blue, large, square", mode, said)
		}
	}
}

// Off a terminal with no --answer left, send prints the question on stdout
// and exits 8, saying how to answer; `send --task ID ANSWER` answers it and
// follows the task to its end (a question it then asks with no --answer
// exits 8 again).
func TestSendWithoutAnAnswerExits(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, twoQuestions))
	out, errOut, code := runSend(t, s.url, "--answer", "blue", "pick")
	m := regexp.MustCompile(`(?m)^task (\S+): input-required \(Which size\?\)\n  asked by: subagent 0\n`).FindStringSubmatch(out)
	if code != api.ExitInputRequired || m == nil {
		t.Fatalf("send with one --answer for two questions: exit %d, want %d with the second question\nstdout:\n%s\nstderr:\n%s", code, api.ExitInputRequired, out, errOut)
	}
	id := m[1]
	if !strings.Contains(errOut, "--task "+id+" ANSWER") {
		t.Errorf("stderr does not say how to answer later:\n%s", errOut)
	}
	out, errOut, code = runSend(t, s.url, "--stream", "--task", id, "large")
	if code != api.ExitInputRequired || !strings.Contains(out, "task "+id+": input-required (Which shape?)\n  asked by: subagent 0.1\n  choices: round, square\n") {
		t.Fatalf("send --task %s large: exit %d, want %d with the child's question\nstdout:\n%s\nstderr:\n%s", id, code, api.ExitInputRequired, out, errOut)
	}
	out, errOut, code = runSend(t, s.url, "--task", id, "round")
	if code != 0 || !strings.Contains(out, "task "+id+": completed") || !strings.Contains(out, "root: size round, child got round") {
		t.Fatalf("send --task %s round: exit %d\nstdout:\n%s\nstderr:\n%s", id, code, out, errOut)
	}
	// Bad input is refused before anything is sent.
	for _, bad := range [][]string{{"--answer", " ", "x"}, {"--task", " " + id, "x"}} {
		if _, errOut, code := runSend(t, s.url, bad...); code != api.ExitUsage || !strings.Contains(errOut, bad[0]) {
			t.Errorf("send %q: exit %d, want 2 naming %s:\n%s", bad, code, bad[0], errOut)
		}
	}
	if _, errOut, code := runSend(t, s.url, "--task", "no-such-task", "x"); code != api.ExitFailure || !strings.Contains(errOut, "task not found") {
		t.Errorf("send --task no-such-task: exit %d:\n%s", code, errOut)
	}
}

// On a terminal, send shows the question and reads the answer typed (an
// empty line asks again), over the progress view it redraws on the same
// terminal.
func TestSendAsksOnATerminal(t *testing.T) {
	t.Parallel()
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, askScripts[1].script))
	pty, tty := clitest.OpenPTY(t)
	cmd := agentdCommand(t, "send", "--to", s.url, "--timeout", "60s", "pick a color")
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	screen := readUntil(t, pty, "answer: ")
	if !strings.Contains(screen, ": input-required (Which color?)\r\n  asked by: subagent 0.1\r\n  choices: red, blue\r\nanswer: ") {
		t.Fatalf("the terminal shows %q", screen)
	}
	pty.Write([]byte("\n"))
	readUntil(t, pty, "answer: ")
	pty.Write([]byte("blue\n"))
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("send on a terminal: %v\nstdout: %s\nterminal: %q", err, stdout.String(), screen+readUntilQuiet(pty))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("send on a terminal did not end after the answer\nstdout: %s\nterminal: %q", stdout.String(), screen+readUntilQuiet(pty))
	}
	if !strings.Contains(stdout.String(), ": completed") || !strings.Contains(stdout.String(), "root: child got blue") {
		t.Fatalf("stdout:\n%s", stdout.String())
	}
}

// An approval (--approve exec) through send: the question names the tool
// and its arguments; "yes" runs the command, "no" (streamed) is the error
// result the model sees, the command not run.
func TestSendApproval(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "[depth 0]\ncall subagent.exec {\"argv\":[\"echo\",\"gated-hello\"]}\nanswer \"{transcript}\"\n")
	s := startService(t, "--intelligence", "builtin:script="+script, "--allow-exec", "--approve", "exec")
	asked := "  asked by: subagent 0\n  tool: subagent.exec\n  arguments: {\"argv\":[\"echo\",\"gated-hello\"]}\n  choices: yes, no\n"
	out, errOut, code := runSend(t, s.url, "--answer", "yes", "run it")
	if code != 0 || !strings.Contains(errOut, asked+"answer (--answer): yes\n") || !strings.Contains(out, "gated-hello") || strings.Contains(out, "was not run") {
		t.Fatalf("approved: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, errOut, code = runSend(t, s.url, "--stream", "--answer", "no", "run it")
	if code != 0 || !strings.Contains(errOut, asked+"answer (--answer): no\n") ||
		!strings.Contains(out, `subagent.exec was not run: the person asked did not approve it (answered "no")`) || strings.Contains(out, "gated-hello\\n") {
		t.Fatalf("denied: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// The third-party OpenAI-compatible mock model (mock-llm) asks through a
// real subagent_ask tool call at the root; `agentd send --answer blue`
// answers it, and the mock's next request carries the answer as the tool
// result of that call (recorded between agentd and the mock); the
// distillate is built from it.
func TestSendAnswersTheMockLLM(t *testing.T) {
	t.Parallel()
	rec := &chatRecorder{}
	url := rec.start(t, unstreamed(t, startMockLLM(t, askingMockRules("call_ask_1"))))
	s := startService(t, "--intelligence", url, "--model", "mock")
	out, errOut, code := runSend(t, s.url, "--answer", "blue", "pick a color")
	if code != 0 || !strings.Contains(out, ": completed") || !strings.Contains(out, "the person chose blue") {
		t.Fatalf("send: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, ": input-required (Which color?)\n  asked by: subagent 0\n  choices: red, blue\nanswer (--answer): blue\n") {
		t.Errorf("stderr:\n%s", errOut)
	}
	bodies := rec.bodies()
	if len(bodies) != 2 {
		t.Fatalf("the mock got %d requests, want 2", len(bodies))
	}
	var next struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(bodies[1], &next); err != nil {
		t.Fatal(err)
	}
	n := len(next.Messages)
	if n < 2 {
		t.Fatalf("the second request: %s", bodies[1])
	}
	call, result := next.Messages[n-2], next.Messages[n-1]
	if call.Role != "assistant" || len(call.ToolCalls) != 1 || call.ToolCalls[0].ID != "call_ask_1" || call.ToolCalls[0].Function.Name != "subagent_ask" ||
		result.Role != "tool" || result.ToolCallID != "call_ask_1" || result.Content != "blue" {
		t.Fatalf("the second request does not end with subagent_ask's call and the answer as its result: %s", bodies[1])
	}
}

// chatRecorder is a proxy that records each request body on its way to a
// Chat Completions endpoint.
type chatRecorder struct {
	mu  sync.Mutex
	got [][]byte
}

// start serves the recorder in front of target (…/v1) and returns its URL.
func (r *chatRecorder) start(t *testing.T, target string) string {
	t.Helper()
	u, err := neturl.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&neturl.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if strings.HasSuffix(req.URL.Path, "/chat/completions") {
			r.mu.Lock()
			r.got = append(r.got, b)
			r.mu.Unlock()
		}
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + u.Path
}

// bodies returns the request bodies recorded, in order.
func (r *chatRecorder) bodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.got...)
}
