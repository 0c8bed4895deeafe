package client

import (
	"bytes"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/a2a/a2av1"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/server/console"
)

func TestReadSSE(t *testing.T) {
	in := ": keep-alive\n\nevent: snapshot\nid: 1\ndata: {\"a\":1}\n\nevent: other\ndata: x\ndata: y\n\n: c\ndata: z\n\n"
	var got []string
	err := readSSE(strings.NewReader(in), func(event, data string) error {
		got = append(got, event+"|"+data)
		return nil
	})
	if err != nil || strings.Join(got, ";") != `snapshot|{"a":1};other|x`+"\n"+`y;|z` {
		t.Fatalf("events %q, %v", got, err)
	}
}

// TestPrintSnapshot: the watch view shows the tree with each node's grant
// and detectors, the ended subagents and the gauges.
func TestPrintSnapshot(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	last := at.Add(-2 * time.Second)
	ev := &console.Event{At: at, Snapshot: console.Snapshot{
		TreeResult: api.TreeResult{Nodes: []api.TreeNode{
			{AgentPath: "0", TaskID: "root", PID: 10, Status: "running", Deadline: at.Add(time.Minute), Provider: "local",
				Usage: api.Usage{TokensIn: 40, TokensOut: 2, Steps: 1}, MaxTokens: 1000, Health: "busy_healthy", LastProgress: &last},
			{AgentPath: "0.1", TaskID: "kid", ParentTaskID: "root", Depth: 1, Status: "held", Deadline: at.Add(time.Minute), Provider: "local"},
		}},
		Ended:  []console.Ended{{AgentPath: "0.2", TaskID: "gone", Status: api.StatusCancelled, Cause: "operator", EndedAt: at.Add(-3 * time.Second)}},
		Gauges: []console.Gauge{{Name: "task store", Value: 3, Max: 10}, {Name: "tasks in flight", Value: 1}},
	}}
	var b bytes.Buffer
	printSnapshot(&b, ev, "http://127.0.0.1:8080", ev.At)
	out := b.String()
	for _, want := range []string{
		"2 live subagents (running)",
		"0  root  [running]  pid 10  depth 0  steps 1  tokens 42 of 1000  deadline in 1m0s  via local  busy_healthy (last event 2s ago)",
		"└─ 0.1  kid  [held]  pid -",
		"ended lately:\n   0.2  gone  [cancelled (operator)]  tokens 0  3s ago",
		"task store 3/10 · tasks in flight 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("view lacks %q:\n%s", want, out)
		}
	}
}

// TestProgressLines: off a terminal, send prints a line when a child starts
// and one when it ends, never the root's, never twice.
func TestProgressLines(t *testing.T) {
	var b bytes.Buffer
	p := &progress{w: &b}
	task := func(id, path, state, status string, ts string) *a2av1.Task {
		meta := map[string]any{}
		if path != "0" {
			meta["agentd/agent_path"], meta["agentd/parent_task"] = path, "r"
		}
		if status != "" {
			meta["agentd/status"] = status
		}
		text := "objective of " + path
		return &a2av1.Task{ID: id, Status: a2av1.TaskStatus{State: a2av1.TaskState(state), Timestamp: ts},
			Metadata: meta, History: []a2av1.Message{{Parts: []a2av1.Part{{Text: &text}}}}}
	}
	p.saw(task("r", "0", "TASK_STATE_WORKING", "", "2026-01-01T00:00:01Z"))
	p.saw(task("a", "0.1", "TASK_STATE_SUBMITTED", "", "2026-01-01T00:00:02Z"))
	p.saw(task("b", "0.10", "TASK_STATE_COMPLETED", "completed", "2026-01-01T00:00:03Z"))
	p.draw()
	p.saw(task("a", "0.1", "TASK_STATE_WORKING", "", "2026-01-01T00:00:04Z"))
	p.draw()
	p.saw(task("a", "0.1", "TASK_STATE_FAILED", "stalled", "2026-01-01T00:00:05Z"))
	p.saw(task("r", "0", "TASK_STATE_COMPLETED", "completed", "2026-01-01T00:00:06Z"))
	p.draw()
	p.draw()
	want := "child 0.1 started: objective of 0.1\nchild 0.10 completed: objective of 0.10\nchild 0.1 stalled\n"
	if b.String() != want {
		t.Fatalf("progress lines:\n%s\nwant:\n%s", b.String(), want)
	}
	if p.after != "2026-01-01T00:00:06Z" {
		t.Fatalf("the next list starts after %q", p.after)
	}
}

func TestPathLess(t *testing.T) {
	paths := []string{"0.10", "0.2", "0", "0.2.1", "0.1", "0.1.3"}
	sort.Slice(paths, func(i, j int) bool { return pathLess(paths[i], paths[j]) })
	if got := strings.Join(paths, " "); got != "0 0.1 0.1.3 0.2 0.2.1 0.10" {
		t.Fatalf("order %s", got)
	}
}

// TestWatchTicks: on a terminal the watch redraws its last snapshot on each
// tick with its ages advanced by the time passed since it arrived (issue 34:
// "last event 0s ago" froze on a quiet child), and shows each node's
// objective on one line, cut; off a terminal a tick draws nothing (each
// snapshot is printed once). The clock is fake: no wall time is measured.
func TestWatchTicks(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	local := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) // skewed from the server's clock on purpose
	long := "summarise the logs\nof every\tservice " + strings.Repeat("and more ", 30)
	ev := &console.Event{At: at, Snapshot: console.Snapshot{TreeResult: api.TreeResult{Nodes: []api.TreeNode{
		{AgentPath: "0", TaskID: "root", PID: 10, Status: "running", Deadline: at.Add(time.Minute), Provider: "local",
			Health: "busy_healthy", LastProgress: &at, Objective: long},
		{AgentPath: "0.1", TaskID: "kid", ParentTaskID: "root", Depth: 1, Status: "running", Deadline: at.Add(time.Minute), Provider: "local",
			Objective: "read \x1b[2Jthe file"},
	}}}}
	for _, tty := range []bool{true, false} {
		var b bytes.Buffer
		now := local
		v := &treeView{w: &b, base: "http://127.0.0.1:8080", tty: tty, now: func() time.Time { return now }}
		if err := v.tick(); err != nil || b.Len() != 0 {
			t.Fatalf("tty %v: a tick before any snapshot drew %q (%v)", tty, b.String(), err)
		}
		if err := v.snapshot(ev); err != nil {
			t.Fatal(err)
		}
		first := b.String()
		for _, want := range []string{
			"(last event 0s ago)", "deadline in 1m0s",
			"\n   objective: summarise the logs of every service and more and more",
			"\n      objective: read \uFFFD[2Jthe file\n",
		} {
			if !strings.Contains(first, want) {
				t.Errorf("tty %v: the first draw lacks %q:\n%s", tty, want, first)
			}
		}
		for _, line := range strings.Split(first, "\n") {
			if strings.Contains(line, "objective: summarise") && utf8.RuneCountInString(strings.TrimSpace(line)) > len("objective: ")+maxObjectiveLine {
				t.Errorf("the objective's line is not cut: %q", line)
			}
		}
		b.Reset()
		now = now.Add(7 * time.Second)
		if err := v.tick(); err != nil {
			t.Fatal(err)
		}
		got := b.String()
		if !tty {
			if got != "" {
				t.Fatalf("off a terminal a tick drew:\n%s", got)
			}
			continue
		}
		for _, want := range []string{"\x1b[H\x1b[2J", "at " + at.Add(7*time.Second).Local().Format("15:04:05"), "(last event 7s ago)", "deadline in 53s"} {
			if !strings.Contains(got, want) {
				t.Errorf("the tick's draw lacks %q:\n%s", want, got)
			}
		}
	}
}

// TestPrintAudit: a page of the audit trail, one line a record, hostile
// text (a terminal escape, line breaks) made harmless, then the next
// page's flag.
func TestPrintAudit(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var b bytes.Buffer
	printAudit(&b, &api.AuditResult{Records: []api.AuditRecord{
		{Time: at, Caller: "token:admin", Method: api.OpCancel, Target: "t1", Outcome: "ok", Detail: `{"handle":"t1"}`, Instance: "i1"},
		{Time: at, Caller: "spiffe://x/\x1b[31mred", Method: api.OpCaps, Outcome: "error", Detail: "invalid params:\nmax_depth"},
	}, Next: "CURSOR"})
	want := "2026-01-02T03:04:05Z  token:admin  a2a.Cancel  target t1  ok  {\"handle\":\"t1\"}  on i1\n" +
		"2026-01-02T03:04:05Z  spiffe://x/\uFFFD[31mred  a2a.Caps  error  invalid params: max_depth\n" +
		"next: --before CURSOR\n"
	if b.String() != want {
		t.Fatalf("audit page:\n%s\nwant:\n%s", b.String(), want)
	}
}
