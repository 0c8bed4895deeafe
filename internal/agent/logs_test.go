package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/otlptest"
	"github.com/agentd/agentd/internal/testkit"
)

// serveScript runs one subagent (Serve, in process) playing script with p,
// answering every tool call with answer, and returns its stderr once its
// result frame has arrived.
func serveScript(t *testing.T, p *api.SpawnPayload, script string, answer string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "s.txt")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Intelligence.Endpoint = "builtin:script=" + file
	var stderr testkit.Buffer // the child's stderr, written by its loggers and read here
	r, w, inW, code := serveOverPipes("", &stderr)
	if f, err := r.Read(); err != nil || f.Method != api.MethodReady {
		t.Fatalf("first frame %+v %v", f, err)
	}
	if err := w.Send(api.MethodSpawn, 0, p); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := r.Read()
		if err != nil {
			t.Fatalf("control channel: %v", err)
		}
		if f.Method == api.MethodToolCall {
			resp, _ := api.NewResponse(f.ID, api.TextResult(answer, false))
			if err := w.Write(resp); err != nil {
				t.Fatal(err)
			}
		}
		if f.Method == api.MethodResult {
			var res api.SubagentResult
			if err := api.DecodeParams(f, &res); err != nil || res.Status != api.StatusCompleted {
				t.Fatalf("result %+v %v\n%s", res, err, stderr.String())
			}
			break
		}
	}
	inW.Close()
	if c := <-code; c != 0 {
		t.Fatalf("exit %d", c)
	}
	return stderr.String()
}

// levels returns the levels of a child's JSON log lines, with how many of each.
func levels(t *testing.T, stderr string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var rec struct{ Level string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		out[rec.Level]++
	}
	return out
}

// A child logs at its payload's telemetry.log_level: at warn it writes no
// info or debug line; at info its start and end (and what the script saw);
// at debug each model and tool
// call too.
func TestChildLogLevel(t *testing.T) {
	const script = "[default]\ncall subagent.status {\"handle\":\"h\"}\nanswer \"done\"\n"
	for _, tc := range []struct {
		level string
		want  map[string]int
	}{
		{"warn", map[string]int{}},
		{"info", map[string]int{"INFO": 3}},
		{"debug", map[string]int{"INFO": 3, "DEBUG": 5}},
	} {
		t.Run(tc.level, func(t *testing.T) {
			p := payload()
			p.Telemetry.LogLevel = tc.level
			stderr := serveScript(t, p, script, "ok")
			got := map[string]int{}
			if strings.TrimSpace(stderr) != "" {
				got = levels(t, stderr)
			}
			if len(got) != len(tc.want) || got["INFO"] != tc.want["INFO"] || got["DEBUG"] != tc.want["DEBUG"] {
				t.Errorf("lines by level %v, want %v:\n%s", got, tc.want, stderr)
			}
		})
	}
}

// Prompts, model answers, and tool arguments and results reach neither the
// child's log (at debug, where every model and tool call has its line) nor
// its spans unless its payload's telemetry.log_content is set; with it they
// reach both.
func TestLogContent(t *testing.T) {
	const (
		prompt = "OBJECTIVE-7c1f"
		arg    = "ARGUMENT-52be"
		result = "RESULT-9d03"
		answer = "ANSWER-e4a8"
	)
	script := "[default]\ncall subagent.status {\"handle\":\"" + arg + "\"}\nanswer \"" + answer + "\"\n"
	for _, content := range []bool{false, true} {
		rcv := otlptest.NewReceiver()
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
		p := payload()
		p.Contract.Objective = prompt
		p.Telemetry.LogLevel, p.Telemetry.LogContent = "debug", content
		stderr := serveScript(t, p, script, result)
		var attrs strings.Builder
		for _, s := range rcv.Spans() {
			for k, v := range s.Attrs {
				attrs.WriteString(k + "=" + v + "\n")
			}
		}
		rcv.Close()
		for _, secret := range []string{prompt, arg, result, answer} {
			inLog, inSpans := strings.Contains(stderr, secret), strings.Contains(attrs.String(), secret)
			if inLog != content || inSpans != content {
				t.Errorf("log_content %v: %s in the log %v, in span attributes %v", content, secret, inLog, inSpans)
			}
		}
		if !strings.Contains(stderr, `"msg":"tool called"`) || !strings.Contains(stderr, `"msg":"model answered"`) {
			t.Errorf("log_content %v: the debug lines of the calls are missing:\n%s", content, stderr)
		}
		if t.Failed() {
			t.Logf("log:\n%s\nspan attributes:\n%s", stderr, attrs.String())
		}
	}
}
