package agent

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// A subagent whose first endpoint answers 500 completes on its fallback,
// which gets the key of the variable its key_env names (the first endpoint
// the key Serve was given), and tells the supervisor of each call, the
// failover and the breaker that opened, over the control channel.
func TestChildFailsOverAndReports(t *testing.T) {
	t.Setenv("AGENT_TEST_FALLBACK_KEY", "sk-fallback-99")
	first := newFakeLLM(t, httpError(500))
	second := newFakeLLM(t, answer("from the fallback", 5, 2))
	p := llmPayload(first)
	p.Intelligence.Retries = intPtr(0)
	p.Intelligence.Breaker = api.BreakerPolicy{Failures: 1}
	p.Intelligence.Fallbacks = []api.Intelligence{{Endpoint: second.endpoint(), Model: "backup", KeyEnv: "AGENT_TEST_FALLBACK_KEY"}}
	var stderr testkit.Buffer
	run := runChild(t, p, "sk-primary-98", superEnd{stderr: &stderr})
	wantStatus(t, run, api.StatusCompleted, "")
	if run.result.Distillate.Text() != "from the fallback" {
		t.Fatalf("distillate %+v", run.result.Distillate)
	}
	if got := first.requests()[0].Header.Get("Authorization"); got != "Bearer sk-primary-98" {
		t.Errorf("first endpoint's Authorization %q", got)
	}
	if got := second.requests()[0].Header.Get("Authorization"); got != "Bearer sk-fallback-99" {
		t.Errorf("fallback's Authorization %q", got)
	}
	var kinds []string
	for _, r := range run.intel {
		switch {
		case r.Outcome != "":
			kinds = append(kinds, r.Model+":"+r.Outcome)
		case r.FailoverTo != nil:
			kinds = append(kinds, r.Model+"->"+r.FailoverTo.Model)
		case r.Breaker != nil:
			kinds = append(kinds, r.Model+":breaker "+r.Breaker.State)
		}
	}
	if got := strings.Join(kinds, ", "); got != "test-model:server_error, test-model:breaker open, test-model->backup, backup:ok" {
		t.Fatalf("reports: %s", got)
	}
	if strings.Contains(stderr.String(), "sk-") {
		t.Fatalf("a key is in the child's log:\n%s", stderr.String())
	}
}

// A tool call whose arguments are not JSON is answered in the conversation
// (the model is told to call again) and never forwarded to the supervisor;
// the run goes on and completes.
func TestMalformedToolArgumentsAnswered(t *testing.T) {
	f := newFakeLLM(t,
		toolCalls(5, 2, callSpec{"files__read", `{"path": "/x"`}),
		answer("done", 5, 1))
	p := llmPayload(f)
	p.Tools = []api.ToolSpec{{Name: "files/read", Description: "read a file"}}
	run := runChild(t, p, "", superEnd{})
	wantStatus(t, run, api.StatusCompleted, "")
	if len(run.toolCalls) != 0 {
		t.Fatalf("forwarded %+v", run.toolCalls)
	}
	msgs := f.requests()[1].Body.Messages
	if last := msgs[len(msgs)-1]; last.Role != "tool" || !strings.Contains(last.text(), "not valid JSON") {
		t.Fatalf("tool turn %+v", last)
	}
}
