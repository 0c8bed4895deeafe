package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/anthropictest"
)

// A subagent run (Serve and the loop) against a local Messages server
// (dialect anthropic): its tool calls reach the supervisor and their
// results go back as tool_result blocks, a call with malformed input is
// answered by the loop and the run goes on, and the usage, the cache's
// tokens included, reaches the supervisor and the result.

func anthropicPayload(srv *anthropictest.Server) *api.SpawnPayload {
	return &api.SpawnPayload{
		AgentID: "0", AgentPath: "0",
		Contract:  api.OutputContract{Objective: "say what the file says", OutputFormat: api.OutputFormat{Kind: api.FormatText}},
		Limits:    api.Limits{MaxSteps: 10, MaxTokens: 100000, Deadline: api.Duration(20 * time.Second)},
		Telemetry: api.Telemetry{RunID: "run-anthropic"},
		Intelligence: api.Intelligence{Endpoint: srv.BaseURL(), Model: "claude-test", Dialect: api.DialectAnthropic,
			Retries: intPtr(2), RetryBackoff: api.Duration(10 * time.Millisecond), RequestTimeout: api.Duration(10 * time.Second)},
	}
}

func TestAnthropicToolCallRun(t *testing.T) {
	srv := anthropictest.NewServer(
		anthropictest.Message("tool_use", anthropictest.Usage{Input: 40, Output: 9, CacheWrite: 10},
			anthropictest.Text("reading"), anthropictest.ToolUse("toolu_1", "files__read", `{"path":"/x"}`)),
		// Only a stream can carry malformed input (a whole answer is one
		// JSON document); this one comes unasked, and is read as well.
		anthropictest.Stream(anthropictest.StreamEvents("tool_use", anthropictest.Usage{Input: 5, Output: 3, CacheRead: 50}, 4,
			anthropictest.ToolUse("toolu_2", "files__read", `{"path": `))...),
		anthropictest.Message("end_turn", anthropictest.Usage{Input: 6, Output: 4, CacheRead: 60}, anthropictest.Text("the file says hello")),
	)
	defer func() {
		srv.Close()
		if err := srv.Err(); err != nil {
			t.Error(err)
		}
	}()
	p := anthropicPayload(srv)
	p.Tools = []api.ToolSpec{{Name: "files/read", Description: "read a file", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}
	run := runChild(t, p, "sk-ant-test", superEnd{tool: func(c api.ToolCall) api.ToolResult {
		return api.TextResult("hello from "+string(c.Args), false)
	}})
	wantStatus(t, run, api.StatusCompleted, "")
	wantUsage(t, run, 40+10+5+50+6+60, 9+3+4, 3)
	if u := run.result.Usage; u.CacheReadTokens != 110 || u.CacheWriteTokens != 10 {
		t.Errorf("result usage %+v, want 110 cache reads and 10 cache writes", u)
	}
	if got := run.result.Distillate.Text(); got != "the file says hello" {
		t.Fatalf("distillate %q", got)
	}
	if len(run.toolCalls) != 1 || run.toolCalls[0].Tool != "files/read" || canonicalJSON(run.toolCalls[0].Args) != `{"path":"/x"}` {
		t.Fatalf("supervisor saw tool calls %+v, want one files/read {path:/x} (the malformed one answered by the loop)", run.toolCalls)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || reqs[0].Header.Get("X-Api-Key") != "sk-ant-test" {
		t.Fatalf("%d requests; x-api-key %q", len(reqs), reqs[0].Header.Get("X-Api-Key"))
	}
	second := reqs[1].Params.Messages
	last := second[len(second)-1]
	if last.Role != "user" || len(last.Content) != 1 || last.Content[0].OfToolResult == nil || last.Content[0].OfToolResult.ToolUseID != "toolu_1" ||
		!strings.Contains(string(reqs[1].Raw), `hello from {\"path\":\"/x\"}`) {
		t.Fatalf("second request's last turn: %s", reqs[1].Raw)
	}
	third := string(reqs[2].Raw)
	if !strings.Contains(third, `"tool_use_id":"toolu_2"`) || !strings.Contains(third, "not valid JSON") {
		t.Fatalf("the malformed call was not answered as such: %s", third)
	}
}
