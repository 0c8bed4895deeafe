package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor/mcp"
	"github.com/agentd/agentd/supervisor/trigger"
)

// triggeredTask is a task of ListTasks (A2A 1.0) as these tests read it.
type triggeredTask struct {
	ID     string `json:"id"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
	Metadata map[string]any `json:"metadata"`
}

// triggeredTasks returns the service's tasks that a trigger started, oldest
// first.
func triggeredTasks(t *testing.T, s *service) []triggeredTask {
	t.Helper()
	var page struct {
		Tasks []triggeredTask `json:"tasks"`
	}
	if e := rpc(t, s, "1.0", "ListTasks", `{}`, &page); e != nil {
		t.Fatalf("ListTasks: %+v", e)
	}
	var out []triggeredTask
	for i := len(page.Tasks) - 1; i >= 0; i-- { // ListTasks is newest first
		if _, ok := page.Tasks[i].Metadata["agentd/trigger"]; ok {
			out = append(out, page.Tasks[i])
		}
	}
	return out
}

func metaInt(m map[string]any, k string) int {
	f, _ := m[k].(float64)
	return int(f)
}

// historyText is the text of a task's first message.
func historyText(t *testing.T, s *service, id string) string {
	t.Helper()
	task, err := s.client(t).GetTask(context.Background(), &a2a.TaskQueryParams{ID: a2a.TaskID(id)})
	if err != nil {
		t.Fatalf("tasks/get %s: %v", id, err)
	}
	var b strings.Builder
	if len(task.History) > 0 {
		for _, p := range task.History[0].Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				b.WriteString(tp.Text + "\n")
			}
		}
	}
	return b.String()
}

// A service in loop mode runs its instruction again after each run: each run
// is an A2A task that ListTasks and tasks/get show, completed, with the
// trigger (mode, session, seq, attempt) in its metadata; --max-runs stops it
// and the service keeps serving.
func TestServeLoopRunsAreTasks(t *testing.T) {
	t.Parallel()
	s := startService(t, "--mode", "loop", "--max-runs", "2", "--interval", "50ms", "--instruction", "count these three")
	var got []triggeredTask
	testkit.WaitFor(t, 30*time.Second, "two loop tasks completed", func() bool {
		got = triggeredTasks(t, s)
		done := 0
		for _, tk := range got {
			if tk.Status.State == "TASK_STATE_COMPLETED" {
				done++
			}
		}
		return done == 2
	})
	for i, tk := range got {
		m := tk.Metadata
		if m["agentd/trigger"] != "loop" || m["agentd/trigger_session"] != "trigger:loop" || metaInt(m, "agentd/trigger_seq") != i+1 || metaInt(m, "agentd/trigger_attempt") != 1 || m["agentd/run_id"] == "" {
			t.Fatalf("task %d metadata %v", i, m)
		}
		task, err := s.client(t).GetTask(context.Background(), &a2a.TaskQueryParams{ID: a2a.TaskID(tk.ID)})
		if err != nil || !strings.Contains(artifactText(task), "3 words") {
			t.Fatalf("tasks/get %s: %v %+v", tk.ID, err, task)
		}
	}
	// The loop stopped at two; the service still serves messages.
	task, err := s.client(t).SendMessage(context.Background(), textMessage("one two"))
	if err != nil {
		t.Fatal(err)
	}
	if tk, ok := task.(*a2a.Task); !ok || !strings.Contains(artifactText(tk), "2 words") {
		t.Fatalf("a message after the loop: %+v", task)
	}
	if n := len(triggeredTasks(t, s)); n != 2 {
		t.Fatalf("%d triggered tasks, want 2", n)
	}
}

// A root that cannot reach ctrl/ready (here: a spawn-ready bound no re-exec
// meets) is a crash before ready, weighing 3: two of them open the loop's
// restart breaker. a2a.Tree shows it open; the tasks are failed with their
// attempts; a2a.CloseBreaker closes it and the session starts again at once.
// In `agentd run` the open breaker ends the run with the last run's code.
func TestBreakerOpensOnRootCrashingAtStart(t *testing.T) {
	t.Parallel()
	s := startOpService(t, "--mode", "loop", "--instruction", "never ready", "--spawn-ready", "1ms")
	breaker := func() (api.Breaker, bool) {
		for _, b := range s.tree().Breakers {
			if b.Key == "trigger:loop" {
				return b, true
			}
		}
		return api.Breaker{}, false
	}
	testkit.WaitFor(t, 30*time.Second, "the loop's breaker open", func() bool {
		b, ok := breaker()
		return ok && b.Open
	})
	b, _ := breaker()
	if b.Failures != 6 || b.LastOutcome != "crash_before_ready" || b.OpenedAt == nil {
		t.Fatalf("breaker %+v", b)
	}
	got := triggeredTasksAs(t, s)
	if len(got) != 2 {
		t.Fatalf("%d tasks before the breaker opened, want 2: %+v", len(got), got)
	}
	for i, tk := range got {
		if tk.Status.State != "TASK_STATE_FAILED" || metaInt(tk.Metadata, "agentd/trigger_attempt") != i+1 || tk.Metadata["agentd/status"] != "crashed" {
			t.Fatalf("task %d: %+v", i, tk)
		}
	}
	var closed api.CloseBreakerResult
	s.op(api.OpCloseBreaker, api.CloseBreakerParams{Key: "trigger:loop"}, &closed)
	if !closed.Known || !closed.WasOpen {
		t.Fatalf("CloseBreaker: %+v", closed)
	}
	// Closed, the session starts again, crashes twice more and opens again.
	testkit.WaitFor(t, 30*time.Second, "two more runs after the close", func() bool { return len(triggeredTasksAs(t, s)) == 4 })
	testkit.WaitFor(t, 30*time.Second, "the breaker open again", func() bool {
		b, ok := breaker()
		return ok && b.Open
	})
	r, err := callRPC(t, http.DefaultClient, s.url, api.OpCloseBreaker, map[string]any{}, opAuth)
	if err != nil || r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("CloseBreaker without a key: %v %+v", err, r.Error)
	}

	out, code := runCombined(t, "run", "--mode", "loop", "--spawn-ready", "1ms", "--instruction", "never ready")
	if code != 1 || !strings.Contains(out, "the restart breaker opened") || strings.Count(out, `"msg":"`+trigger.MsgRunEnded+`"`) != 2 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
}

// triggeredTasksAs is triggeredTasks for an operator service (bearer).
func triggeredTasksAs(t *testing.T, s *opService) []triggeredTask {
	t.Helper()
	r, err := callRPC(t, http.DefaultClient, s.url, "ListTasks", map[string]any{}, map[string]string{"Authorization": opAuth["Authorization"], "A2A-Version": "1.0"})
	if err != nil || r.Error != nil {
		t.Fatalf("ListTasks: %v %+v", err, r.Error)
	}
	var page struct {
		Tasks []triggeredTask `json:"tasks"`
	}
	if err := json.Unmarshal(r.Result, &page); err != nil {
		t.Fatal(err)
	}
	var out []triggeredTask
	for i := len(page.Tasks) - 1; i >= 0; i-- {
		if _, ok := page.Tasks[i].Metadata["agentd/trigger"]; ok {
			out = append(out, page.Tasks[i])
		}
	}
	return out
}

// Reactive mode against the reference MCP server: agentd subscribes to a
// dynamic text resource and reads it at once, and that read starts a run
// whose task carries the content; the run's script turns the server's
// simulated updates on, the update starts a second run (reason updated),
// which turns them off again. A restarted agentd subscribes on its new
// session and reads again: a run with the content as it is now, although no
// notification was ever sent for it.
func TestReactiveEverythingReadAfterSubscribe(t *testing.T) {
	t.Parallel()
	ev := startEverything(t, 0)
	const uri = "demo://resource/dynamic/text/1"
	script := writeScript(t, `[depth 0]
call everything/toggle-subscriber-updates
answer "seen"
`)
	args := []string{"--mode", "reactive", "--subscribe", "everything=" + uri, "--debounce", "100ms",
		"--mcp", "everything=" + ev.url, "--mcp-tags", "everything=none",
		"--intelligence", "builtin:script=" + script, "--instruction", "act on the resource"}
	s := startService(t, args...)
	var got []triggeredTask
	testkit.WaitFor(t, 60*time.Second, "the subscribed run and the updated run completed", func() bool {
		got = triggeredTasks(t, s)
		done := 0
		for _, tk := range got {
			if tk.Status.State == "TASK_STATE_COMPLETED" {
				done++
			}
		}
		return done >= 2
	})
	first, second := got[0], got[1]
	if first.Metadata["agentd/trigger_reason"] != "subscribed" || second.Metadata["agentd/trigger_reason"] != "updated" ||
		first.Metadata["agentd/trigger_resource"] != uri || first.Metadata["agentd/trigger_server"] != "everything" ||
		first.Metadata["agentd/trigger"] != "reactive" {
		t.Fatalf("tasks %+v", got)
	}
	text := historyText(t, s, first.ID)
	if !strings.Contains(text, "act on the resource") || !strings.Contains(text, "Resource 1: This is a plaintext resource created at") {
		t.Fatalf("the subscribed run's message:\n%s", text)
	}
	if n := len(testkit.WithMsg(testkit.JSONLines(s.logs.String()), mcp.MsgSubscribed)); n != 1 {
		t.Fatalf("%d resources/subscribe, want 1", n)
	}
	// The dynamic resource's content carries the time it was read: let it
	// change while agentd is down.
	s.stop(t)
	time.Sleep(1100 * time.Millisecond) // the resource's clock has second resolution
	s2 := startService(t, args...)
	var again []triggeredTask
	testkit.WaitFor(t, 60*time.Second, "the read-after-subscribe run of the restarted agentd", func() bool {
		again = triggeredTasks(t, s2)
		return len(again) > 0 && again[0].Status.State == "TASK_STATE_COMPLETED"
	})
	if again[0].Metadata["agentd/trigger_reason"] != "subscribed" {
		t.Fatalf("after the restart: %+v", again[0])
	}
	text2 := historyText(t, s2, again[0].ID)
	if !strings.Contains(text2, "Resource 1: This is a plaintext resource created at") || text2 == text {
		t.Fatalf("after the restart the run saw:\n%s\nbefore:\n%s", text2, text)
	}
	if n := len(testkit.WithMsg(testkit.JSONLines(s2.logs.String()), mcp.MsgSubscribed)); n != 1 {
		t.Fatalf("the restarted agentd sent %d resources/subscribe, want 1", n)
	}
}

// A schedule with --state-dir keeps its last tick; a restarted agentd that
// missed ticks while it was down runs once at start (the latest missed tick),
// not once per tick missed.
func TestScheduleMissedTickRunsOnceAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"run", "--mode", "schedule", "--schedule", "@every 1s", "--state-dir", dir, "--instruction", "tick tock"}
	first := agentdCommand(t, args...)
	var out1 testkit.Buffer
	first.Stdout, first.Stderr = &out1, &out1
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "two ticks run", func() bool {
		return strings.Count(out1.String(), `"msg":"`+trigger.MsgRunEnded+`"`) >= 2
	})
	first.Process.Signal(syscall.SIGTERM)
	if err := first.Wait(); err != nil {
		t.Fatalf("the first agentd: %v\n%s", err, out1.String())
	}
	state, err := os.ReadFile(filepath.Join(dir, "schedule.json"))
	if err != nil || !strings.Contains(string(state), `"last_tick"`) {
		t.Fatalf("state: %s %v", state, err)
	}
	time.Sleep(3 * time.Second) // three ticks or so go by while agentd is down

	second := agentdCommand(t, args...)
	var out2 testkit.Buffer
	second.Stdout, second.Stderr = &out2, &out2
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the missed tick run", func() bool {
		return strings.Contains(out2.String(), trigger.MsgMissedTick) &&
			strings.Count(out2.String(), `"msg":"`+trigger.MsgRunEnded+`"`) >= 1
	})
	second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Fatalf("the second agentd: %v\n%s", err, out2.String())
	}
	missed := 0
	for _, rec := range testkit.WithMsg(testkit.JSONLines(out2.String()), trigger.MsgRunStarted) {
		if rec["trigger_missed"] == true {
			missed++
		}
	}
	if missed != 1 {
		t.Fatalf("%d missed-tick runs, want exactly 1\n%s", missed, out2.String())
	}
}

// A workflow runs its steps as one tree; a bad workflow file, like every bad
// mode setting, exits 2 naming the setting.
func TestWorkflowAndModeSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"steps": [
	  {"name": "a", "objective": "alpha beta"},
	  {"name": "b", "objective": "gamma delta epsilon"},
	  {"name": "join", "objective": "join the two", "needs": ["a", "b"]}
	]}`)
	out, code := runCombined(t, "run", "--mode", "workflow", "--workflow", good)
	if code != 0 || !strings.Contains(out, `"join the two" has 3 words`) {
		t.Fatalf("workflow: exit %d\n%s", code, out)
	}
	started := testkit.WithMsg(testkit.JSONLines(out), "workflow step started")
	if len(started) != 3 || str(started[2], "step") != "join" || str(started[2], "child_path") != "0.3" {
		t.Fatalf("steps started: %v", started)
	}

	// In serve, the workflow is one task at start whose steps are its nested
	// tasks.
	svc := startService(t, "--mode", "workflow", "--workflow", good)
	var root triggeredTask
	testkit.WaitFor(t, 30*time.Second, "the workflow's task completed", func() bool {
		got := triggeredTasks(t, svc)
		if len(got) == 1 && got[0].Status.State == "TASK_STATE_COMPLETED" {
			root = got[0]
			return true
		}
		return false
	})
	if root.Metadata["agentd/trigger"] != "workflow" {
		t.Fatalf("the workflow's task: %+v", root)
	}
	steps := 0
	for _, tk := range listTasks(t, svc) {
		if meta, _ := tk["metadata"].(map[string]any); meta["agentd/parent_task"] == root.ID {
			steps++
		}
	}
	if steps != 3 {
		t.Fatalf("%d nested tasks under the workflow's task, want its 3 steps", steps)
	}

	cycle := write("cycle.json", `{"steps": [{"name": "a", "objective": "x", "needs": ["b"]}, {"name": "b", "objective": "y", "needs": ["a"]}]}`)
	unknown := write("unknown.json", `{"steps": [{"name": "a", "objective": "x", "needs": ["nope"]}]}`)
	for _, tc := range []struct {
		setting string
		args    []string
	}{
		{"--workflow " + cycle + ": workflow: a cycle of needs: a -> b -> a", []string{"run", "--mode", "workflow", "--workflow", cycle}},
		{`needs "nope": no step has that name`, []string{"run", "--mode", "workflow", "--workflow", unknown}},
		{`--schedule "every day"`, []string{"run", "--mode", "schedule", "--schedule", "every day", "x"}},
		{`--subscribe ghost=demo://x: no MCP server "ghost" is configured`, []string{"run", "--mode", "reactive", "--subscribe", "ghost=demo://x", "x"}},
		{"--interval is a setting of --mode loop, and the mode is once", []string{"run", "--interval", "1s", "x"}},
		{"--stop-on is a setting of --mode loop, and the mode is none", []string{"serve", "--stop-on", "completed"}},
		{"--mode loop needs --instruction", []string{"serve", "--mode", "loop"}},
	} {
		wantUsageError(t, "", tc.setting, tc.args...)
	}
	for _, cmd := range []string{"run", "serve"} {
		help, _ := runCombined(t, cmd, "-h")
		for _, m := range []string{"once ", "loop ", "schedule ", "reactive ", "workflow ", "restart governor"} {
			if !strings.Contains(help, m) {
				t.Errorf("%s -h does not describe %q", cmd, m)
			}
		}
	}
}
