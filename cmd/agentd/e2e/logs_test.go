package e2e

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/testkit"
)

// runLogs runs agentd run with args and returns its stderr.
func runLogs(t *testing.T, args ...string) string {
	t.Helper()
	cmd := agentdCommand(t, append([]string{"run"}, args...)...)
	var stdout, stderr testkit.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run %v: %v\n%s", args, err, stderr.String())
	}
	return stderr.String()
}

// --log-content is off by default: at debug level, where every model and
// tool call of every subagent has its log line, no prompt, model answer or
// tool argument or result appears in agentd's log; with the flag they do.
func TestLogContentFlag(t *testing.T) {
	t.Parallel()
	const (
		prompt = "INSTRUCTION-a41c"
		arg    = "ARGUMENT-03f9"
		answer = "ANSWER-77d2"
	)
	script := writeScript(t, `[depth 0]
spawn sync "CHILD-OBJECTIVE-5e01"
call subagent.status {"handle":"`+arg+`"}
answer "`+answer+`"

[depth 1]
answer "CHILD-ANSWER-b3c8"
`)
	secrets := []string{prompt, arg, answer, "CHILD-OBJECTIVE-5e01", "CHILD-ANSWER-b3c8",
		`no subagent with handle \"` + arg} // a tool result
	for _, content := range []bool{false, true} {
		args := []string{"--log-level", "debug", "--intelligence", "builtin:script=" + script, "--instruction", prompt}
		if content {
			args = append(args, "--log-content")
		}
		logs := runLogs(t, args...)
		if len(testkit.WithMsg(testkit.JSONLines(logs), "tool called")) < 2 {
			t.Fatalf("log-content %v: no debug line of the tool calls:\n%s", content, logs)
		}
		for _, s := range secrets {
			if strings.Contains(logs, s) != content {
				t.Errorf("log-content %v: %q in the log: %v", content, s, !content)
			}
		}
	}
}

// Each child logs at its payload's level, which a root takes from the
// service's --log-level: at warn, with the children writing to their own
// stderr (--aggregate-logs=false, so nothing filters their lines but their
// own level), no process writes an info line.
func TestLogLevelReachesChildren(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "[depth 0]\nspawn sync \"child\"\nanswer \"done\"\n\n[depth 1]\nanswer \"child done\"\n")
	info := runLogs(t, "--aggregate-logs=false", "--intelligence", "builtin:script="+script, "--instruction", "x")
	if len(testkit.WithMsg(testkit.JSONLines(info), "subagent started")) != 2 {
		t.Fatalf("at info, the children's start lines are missing:\n%s", info)
	}
	warn := runLogs(t, "--log-level", "warn", "--aggregate-logs=false", "--intelligence", "builtin:script="+script, "--instruction", "x")
	for _, r := range testkit.JSONLines(warn) {
		if l := str(r, "level"); l == "INFO" || l == "DEBUG" {
			t.Errorf("a %s line at --log-level warn: %v", l, r)
		}
	}
}

// --aggregate-logs (the default) forwards each child's lines through the
// supervisor, marked child=true; =false lets the children write their own
// lines, which carry their run_id and agent_path themselves.
func TestAggregateLogs(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "[depth 0]\nspawn sync \"child\"\nanswer \"done\"\n\n[depth 1]\nanswer \"child done\"\n")
	for _, tc := range []struct {
		flag  string
		child bool
	}{{"--aggregate-logs", true}, {"--aggregate-logs=false", false}} {
		started := testkit.WithMsg(testkit.JSONLines(runLogs(t, tc.flag, "--intelligence", "builtin:script="+script, "--instruction", "x")), "subagent started")
		if len(started) != 2 {
			t.Fatalf("%s: %d start lines", tc.flag, len(started))
		}
		paths := map[string]bool{}
		for _, r := range started {
			paths[str(r, "agent_path")] = true
			if _, marked := r["child"]; marked != tc.child || str(r, "run_id") == "" {
				t.Errorf("%s: start line %v", tc.flag, r)
			}
		}
		if !paths["0"] || !paths["0.1"] {
			t.Errorf("%s: start lines of %v", tc.flag, paths)
		}
	}
}
