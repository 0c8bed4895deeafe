package e2e

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/anthropictest"
)

// TestRunAgainstMessagesAPI runs the real binary with the anthropic dialect
// against a local Messages server: the root calls subagent_spawn (a
// tool_use), the supervisor re-execs a child that asks the same server, and
// the child's result goes back to the root as a tool_result, which answers.
// The key comes from ANTHROPIC_API_KEY (the dialect's fallback) and reaches
// the child in its environment, never on argv; every request holds to the
// SDK's types.
func TestRunAgainstMessagesAPI(t *testing.T) {
	t.Parallel()
	srv := anthropictest.NewServer(
		anthropictest.Message("tool_use", anthropictest.Usage{Input: 30, Output: 12},
			anthropictest.Text("asking a child"),
			anthropictest.ToolUse("toolu_1", "subagent_spawn", `{"contract":{"objective":"count the words: alpha beta gamma","output_format":{"kind":"text"}}}`)),
		anthropictest.Message("end_turn", anthropictest.Usage{Input: 20, Output: 3, CacheRead: 7}, anthropictest.Text("three words")),
		anthropictest.Message("end_turn", anthropictest.Usage{Input: 40, Output: 6}, anthropictest.Text("the child counted three words")),
	)
	t.Cleanup(srv.Close)
	stdout, stderr, code := runOnceEnv(t, []string{"ANTHROPIC_API_KEY=sk-ant-e2e"},
		"--intelligence", srv.BaseURL(), "--intelligence-dialect", "anthropic", "--model", "claude-test",
		"--intelligence-backoff", "10ms", "--instruction", "how many words has alpha beta gamma?")
	if code != 0 || strings.TrimSpace(stdout) != "the child counted three words" {
		t.Fatalf("exit %d, stdout %q\nstderr: %s", code, stdout, stderr)
	}
	if err := srv.Err(); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if k := r.Header.Get("X-Api-Key"); k != "sk-ant-e2e" {
			t.Errorf("request %d: x-api-key %q", i+1, k)
		}
	}
	// The child's objective is its first user turn, and only there: the
	// system prompt refers to it.
	if m := reqs[1].Params.Messages; len(m) == 0 || len(m[0].Content) != 1 || m[0].Content[0].OfText == nil ||
		m[0].Content[0].OfText.Text != "count the words: alpha beta gamma" {
		t.Errorf("the second request is not the child's: messages %+v", m)
	}
	if sys := reqs[1].Params.System; len(sys) != 1 || strings.Contains(sys[0].Text, "count the words") || !strings.Contains(sys[0].Text, "first user message") {
		t.Errorf("the child's system prompt: %+v", sys)
	}
	last := reqs[2].Params.Messages[len(reqs[2].Params.Messages)-1]
	if len(last.Content) != 1 || last.Content[0].OfToolResult == nil || last.Content[0].OfToolResult.ToolUseID != "toolu_1" ||
		!strings.Contains(string(reqs[2].Raw), "three words") {
		t.Errorf("the root's third request does not carry the child's result: %s", reqs[2].Raw)
	}
}

// TestIntelligenceDialectBadValueExits2: an unknown dialect is bad config,
// named, before anything starts.
func TestIntelligenceDialectBadValueExits2(t *testing.T) {
	t.Parallel()
	wantUsageError(t, "", "--intelligence-dialect", "run", "--intelligence-dialect", "gemini", "--instruction", "x")
	wantUsageError(t, "AGENT_INTELLIGENCE_DIALECT=claude", "--intelligence-dialect", "run", "--instruction", "x")
	wantUsageError(t, "", "--intelligence-max-output-tokens", "run", "--intelligence-max-output-tokens", "0", "--instruction", "x")
}
