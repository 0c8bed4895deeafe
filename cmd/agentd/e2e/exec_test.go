package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// execResults returns the exec results a run's root saw, from its answer
// (the script answers its {transcript}: one "TOOL: TEXT" per line).
func execResults(t *testing.T, transcript string) []api.ExecResult {
	t.Helper()
	var out []api.ExecResult
	for _, line := range strings.Split(transcript, "\n") {
		text, ok := strings.CutPrefix(line, api.ToolExec+": ")
		if !ok {
			continue
		}
		var r api.ExecResult
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			t.Fatalf("not an exec result: %q", text)
		}
		out = append(out, r)
	}
	return out
}

// agentd run --allow-exec: the root runs commands with subagent.exec. Exit
// code and output come back; one that ignores SIGTERM past its timeout is
// killed by the ladder; without --allow-exec the call is refused as a tool
// result and the run goes on.
func TestExecThroughAgentd(t *testing.T) {
	t.Parallel()
	script := writeScript(t, `[depth 0]
call subagent.exec {"argv":["sh","-c","echo hello-from-exec; exit 2"]}
call subagent.exec {"argv":["sh","-c","trap '' TERM; exec sleep 30"],"timeout_ms":300}
answer "{transcript}"
`)
	cmd := agentdCommand(t, "run", "--allow-exec", "--kill-grace", "200ms", "--intelligence", "builtin:script="+script, "--instruction", "run commands")
	var stdout, stderr testkit.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	rs := execResults(t, stdout.String())
	if len(rs) != 2 {
		t.Fatalf("exec results %+v\n%s", rs, stdout.String())
	}
	if r := rs[0]; r.Status != api.StatusCrashed || r.ExitCode != 2 || r.Stdout != "hello-from-exec\n" {
		t.Errorf("first command: %+v", r)
	}
	if r := rs[1]; r.Status != api.StatusDeadline || r.Signal != "SIGKILL" {
		t.Errorf("second command: %+v", r)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the run took %s", d)
	}
	recs := testkit.JSONLines(stderr.String())
	if ended := testkit.WithMsg(recs, "exec ended"); len(ended) != 2 {
		t.Errorf("%d exec children ended, want 2", len(ended))
	}
	started := testkit.WithMsg(recs, "exec started")
	if len(started) != 2 {
		t.Fatalf("%d exec children started, want 2", len(started))
	}
	for _, r := range started {
		if pid := int(r["pid"].(float64)); !testkit.GroupDead(pid) {
			t.Errorf("exec child %d: its process group outlived the run", pid)
		}
	}

	off := agentdCommand(t, "run", "--intelligence", "builtin:script="+script, "--instruction", "run commands")
	var offOut testkit.Buffer
	off.Stdout = &offOut
	if err := off.Run(); err != nil {
		t.Fatalf("run without --allow-exec: %v", err)
	}
	if got := offOut.String(); strings.Count(got, "subagent.exec: exec denied: exec is off") != 2 {
		t.Errorf("without --allow-exec the root saw:\n%s", got)
	}
}

// exec carries sensitive and egress: with --allow-exec, a root grant that
// also holds an untrusted tool holds the trifecta, which the startup gate
// refuses (exit 2) unless --allow-trifecta.
func TestExecCountsInRuleOfTwo(t *testing.T) {
	t.Parallel()
	mcp := []string{"--mcp", "web=http://127.0.0.1:1/mcp", "--mcp-tags", "web=untrusted_input"}
	wantUsageError(t, "", "Rule of Two", append([]string{"run", "--allow-exec", "--instruction", "x"}, mcp...)...)
	wantUsageError(t, "AGENT_ALLOW_EXEC=true", "Rule of Two", append([]string{"run", "--instruction", "x"}, mcp...)...)
	// Without exec the same grant passes the gate (and fails later, on the
	// unreachable server: exit 6).
	if out, code := runCombined(t, append([]string{"run", "--instruction", "x", "--mcp-connect-timeout", "200ms"}, mcp...)...); code != api.ExitMCPUnavailable {
		t.Errorf("without exec: exit %d\n%s", code, out)
	}
	wantUsageError(t, "", "--exec-deadline", "run", "--instruction", "x", "--allow-exec", "--exec-deadline", "0s")
}

// a2a.Tree shows a running exec child as an exec node below its caller; a
// cancel of the task stops it with the rest of the tree and its process
// group is gone.
func TestExecNodeInOperatorTree(t *testing.T) {
	t.Parallel()
	script := writeScript(t, "[depth 0]\ncall subagent.exec {\"argv\":[\"sleep\",\"30\"]}\nanswer \"done\"\n")
	s := startOpService(t, "--allow-exec", "--kill-grace", "200ms", "--intelligence", "builtin:script="+script)
	id := s.send("run a command")
	var ex api.TreeNode
	testkit.WaitFor(t, 20*time.Second, "an exec node in a2a.Tree", func() bool {
		for _, n := range s.tree().Nodes {
			if n.Kind == "exec" && n.PID > 0 && n.ParentTaskID == id {
				ex = n
				return true
			}
		}
		return false
	})
	if ex.AgentPath != "0.1" || ex.Status != "running" || ex.Depth != 1 {
		t.Errorf("exec node %+v", ex)
	}
	s.op(api.OpCancel, map[string]any{"handle": id}, nil)
	testkit.WaitFor(t, 15*time.Second, "the exec child's process group gone", func() bool { return testkit.GroupDead(ex.PID) })
	testkit.WaitFor(t, 15*time.Second, "the task cancelled", func() bool { return s.state(id) == "canceled" })
}
