package client

import (
	"bytes"
	"sort"
	"strings"
	"testing"
	"time"

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
	printSnapshot(&b, ev, "http://127.0.0.1:8080")
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
