package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/chromedp/chromedp"

	"github.com/agentd/agentd/internal/testkit"
)

// mockLLM is one @dwmkerr/mock-llm server (the third-party OpenAI-compatible
// mock, an npm test dependency in e2e/js), run with rules, on a port of
// its own.
type mockLLM struct {
	url string // its base URL, ending in /v1
}

// startMockLLM runs mock-llm with the YAML rules; it is killed and reaped at
// cleanup.
func startMockLLM(t *testing.T, rules string) *mockLLM {
	t.Helper()
	main := filepath.Join("js", "node_modules", "@dwmkerr", "mock-llm", "dist", "main.js")
	if _, err := os.Stat(main); err != nil {
		t.Fatalf("@dwmkerr/mock-llm is not installed in cmd/agentd/e2e/js/node_modules: run `make test-deps`")
	}
	cfg := filepath.Join(t.TempDir(), "mock-llm.yaml")
	if err := os.WriteFile(cfg, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("node", main, "--config", cfg)
	cmd.Env = append(os.Environ(), "HOST=127.0.0.1", fmt.Sprintf("PORT=%d", port))
	var out testkit.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("mock-llm on port %d:\n%s", port, out.String())
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	testkit.WaitFor(t, 20*time.Second, "mock-llm ready", func() bool {
		resp, err := http.Get(base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return &mockLLM{url: base + "/v1"}
}

// mockDown answers every chat completion 503.
const mockDown = `rules:
  - path: "/v1/chat/completions"
    match: "@"
    response:
      status: 503
      content: '{"error":{"message":"primary overloaded","type":"server_error"}}'
`

// mockEcho answers with the Authorization header and the model it was sent.
const mockEcho = `rules:
  - path: "/v1/chat/completions"
    match: "@"
    response:
      status: 200
      content: |
        {"id":"x","object":"chat.completion","model":"m",
         "choices":[{"index":0,"message":{"role":"assistant","content":"fallback answered: {{jmes request headers.authorization}} {{jmes request body.model}}"},"finish_reason":"stop"}],
         "usage":{"prompt_tokens":5,"completion_tokens":3}}
`

// TestFailoverToTheSecondEndpoint: a service whose first endpoint (a
// mock-llm answering 503) is down completes its tasks on the fallback (a
// second mock-llm), which gets its own key (from the variable the fallback's
// key-env names, handed to the child in its environment, never on argv).
// The first task opens the first endpoint's breaker; the second task's child
// is handed that state and never calls it. The WARN lines and /metrics name
// the endpoint and model, a2a.Tree and the console show the breakers, and neither key
// appears in any log line.
func TestFailoverToTheSecondEndpoint(t *testing.T) {
	t.Parallel()
	primary, backup := startMockLLM(t, mockDown), startMockLLM(t, mockEcho)
	const primaryKey, backupKey = "sk-primary-4711", "sk-backup-4712"
	s := startServiceAs(t, agentdBin, []string{"AGENT_INTELLIGENCE_KEY=" + primaryKey, "E2E_BACKUP_KEY=" + backupKey},
		"--intelligence", primary.url, "--model", "primary-model", "--intelligence-retries", "0",
		"--intelligence-fallback", backup.url+",model=backup-model,key-env=E2E_BACKUP_KEY",
		"--intelligence-breaker-failures", "1", "--intelligence-breaker-cooldown", "10m",
		"--metrics-addr", "127.0.0.1:0")
	c := s.client(t)
	for i := range 2 {
		res, err := c.SendMessage(context.Background(), textMessage("answer the question"))
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		want := "fallback answered: Bearer " + backupKey + " backup-model"
		if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != want {
			t.Fatalf("task %d: %s %q, want completed %q", i+1, task.Status.State, artifactText(task), want)
		}
	}
	m := scrape(t, s.metricsURL(t))
	for series, want := range map[string]float64{
		fmt.Sprintf(`agent_intelligence_calls_total{endpoint=%q,model="primary-model",outcome="server_error"}`, primary.url):                                 1,
		fmt.Sprintf(`agent_intelligence_calls_total{endpoint=%q,model="backup-model",outcome="ok"}`, backup.url):                                             2,
		fmt.Sprintf(`agent_intelligence_failovers_total{endpoint=%q,model="primary-model",to_endpoint=%q,to_model="backup-model"}`, primary.url, backup.url): 2,
		fmt.Sprintf(`agent_intelligence_breaker_state{endpoint=%q,model="primary-model"}`, primary.url):                                                      2,
		fmt.Sprintf(`agent_intelligence_breaker_state{endpoint=%q,model="backup-model"}`, backup.url):                                                        0,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	out, code := runCombined(t, "ctl", "a2a.Tree", "--to", s.url)
	if code != 0 || !strings.Contains(out, "intelligence "+primary.url+" model primary-model: breaker open") ||
		!strings.Contains(out, "intelligence "+backup.url+" model backup-model: breaker closed") {
		t.Errorf("ctl a2a.Tree: exit %d\n%s", code, out)
	}
	logs := s.logs.String()
	var failovers, opened, failed int
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, primaryKey) || strings.Contains(line, backupKey) {
			t.Errorf("a key is logged: %s", line)
		}
		var rec struct{ Level, Msg, Endpoint, Model string }
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch rec.Msg {
		case "intelligence failover":
			failovers++
		case "intelligence breaker open":
			opened++
		case "model request failed":
			failed++
		default:
			continue
		}
		if rec.Level != "WARN" || rec.Endpoint != primary.url || rec.Model != "primary-model" {
			t.Errorf("%q logged at %s naming %s %s; want WARN naming %s primary-model", rec.Msg, rec.Level, rec.Endpoint, rec.Model, primary.url)
		}
	}
	if failovers != 2 || opened != 1 || failed != 1 {
		t.Errorf("%d failover, %d breaker-open, %d request-failed lines; want 2, 1, 1", failovers, opened, failed)
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
	// Last, as it skips without chromium: the console's "Intelligence
	// endpoints" table, in a real chromium.
	b := startBrowser(t)
	b.do(t, "open the console", chromedp.Navigate(s.url+"/ui/"))
	b.wait(t, "the endpoints render", `document.querySelectorAll("#intel tbody tr").length === 2 && document.getElementById("intel-empty").hidden`)
	rows := evalJS[[]string](t, b, `[...document.querySelectorAll("#intel tbody tr")].map(tr => tr.innerText.replace(/\s+/g, " "))`)
	joined := strings.Join(rows, "\n")
	if len(rows) != 2 || !strings.Contains(joined, primary.url+" primary-model open 1 ") || !strings.Contains(joined, "primary overloaded") ||
		!strings.Contains(joined, backup.url+" backup-model closed 0") {
		t.Errorf("console rows %q", rows)
	}
	b.mu.Lock()
	for _, p := range b.problems {
		t.Errorf("the page reported: %s", p)
	}
	b.mu.Unlock()
}

// TestFailoverBadConfigExits2: a bad fallback or breaker setting is bad
// config, named in the message, before anything starts.
func TestFailoverBadConfigExits2(t *testing.T) {
	t.Parallel()
	base := []string{"run", "--intelligence", "http://127.0.0.1:9/v1", "--model", "m", "--instruction", "x"}
	for _, tc := range []struct {
		env, setting string
		args         []string
	}{
		{"", "--intelligence-fallback", []string{"--intelligence-fallback", "ftp://host/v1,model=m"}},
		{"", "--intelligence-fallback", []string{"--intelligence-fallback", "http://127.0.0.1:8/v1"}},
		{"", "--intelligence-fallback", []string{"--intelligence-fallback", "http://127.0.0.1:8/v1,model=m,colour=blue"}},
		{"", "--intelligence-fallback", []string{"--intelligence-fallback", "http://u:p@127.0.0.1:8/v1,model=m"}},
		{"", "key-env E2E_UNSET_KEY", []string{"--intelligence-fallback", "http://127.0.0.1:8/v1,model=m,key-env=E2E_UNSET_KEY"}},
		{"", "key-file", []string{"--intelligence-fallback", "http://127.0.0.1:8/v1,model=m,key-file=/nonexistent/key"}},
		{"", "--intelligence-breaker-failures", []string{"--intelligence-breaker-failures", "0"}},
		{"", "--intelligence-breaker-cooldown", []string{"--intelligence-breaker-cooldown", "-1s"}},
		{"AGENT_INTELLIGENCE_FALLBACKS=http://127.0.0.1:8/v1,model=m;http://127.0.0.1:7/v1,colour=blue", "AGENT_INTELLIGENCE_FALLBACKS", nil},
		{"AGENT_INTELLIGENCE_FALLBACKS=http://127.0.0.1:8/v1,model=m;nope", "--intelligence-fallback nope", nil},
	} {
		wantUsageError(t, tc.env, tc.setting, append(append([]string{}, base...), tc.args...)...)
	}
}
