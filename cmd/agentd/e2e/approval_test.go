package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// Issue 32.3: approval gates on an MCP tool (--approve tool:SERVER/TOOL)
// and on a peer (--approve peer:NAME), granted, denied and timed out, asked
// over A2A 0.3 and 1.0, blocking and streaming. What the gated side got is
// read on its side: the MCP server's requests (through a recording proxy in
// front of it), the peer's tasks.

// mcpRecorder is a reverse proxy in front of an MCP server that records the
// tools each tools/call request names.
type mcpRecorder struct {
	url   string
	mu    sync.Mutex
	calls []string
}

// recordMCP starts a recorder in front of the MCP endpoint target.
func recordMCP(t *testing.T, target string) *mcpRecorder {
	t.Helper()
	u, err := neturl.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&neturl.URL{Scheme: u.Scheme, Host: u.Host})
	rp.FlushInterval = -1 // server-sent events pass as they come
	r := &mcpRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPost {
			b, err := io.ReadAll(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			var call struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(b, &call) == nil && call.Method == "tools/call" {
				r.mu.Lock()
				r.calls = append(r.calls, call.Params.Name)
				r.mu.Unlock()
			}
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		rp.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + u.Path
	return r
}

// toolCalls returns the tools called so far, in order.
func (r *mcpRecorder) toolCalls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// approvalOf checks that task asks for an approval of tool with arguments
// (as Go prints the decoded JSON) by the subagent at path.
func approvalOf(t *testing.T, task *a2a.Task, tool, args, path string) {
	t.Helper()
	m := task.Status.Message
	if task.Status.State != a2a.TaskStateInputRequired || m == nil || m.Metadata[api.MetaAskTool] != tool ||
		fmt.Sprint(m.Metadata[api.MetaAskArguments]) != args || m.Metadata[api.MetaAskPath] != path ||
		fmt.Sprint(m.Metadata[api.MetaAskChoices]) != "[yes no]" {
		t.Fatalf("the gated call: %s %+v, want input-required asking to approve %s %s", task.Status.State, m, tool, args)
	}
}

// mcpReady waits until s has listed its MCP servers' tools (/readyz 200):
// a task started before has none in its grant.
func mcpReady(t *testing.T, s *service) {
	t.Helper()
	testkit.WaitFor(t, 20*time.Second, "agentd ready (its MCP server connected)", func() bool {
		resp, err := http.Get(s.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// observed returns what the script at path saw of tool's results, from the
// service's log (--log-content).
func observed(s *service, path, tool string) []map[string]any {
	var out []map[string]any
	for _, o := range observedIn(s.logs.String()) {
		if str(o, "agent_path") == path && str(o, "tool") == tool {
			out = append(out, o)
		}
	}
	return out
}

// A gated MCP tool: granted over 0.3 message/send, the server gets the call
// and the model its result; denied over 1.0 SendMessage, the model gets the
// error result and the server no call; unanswered within --input-timeout
// (a 0.3 stream), the task fails with cause input_timeout and the server
// gets no call.
func TestApprovalGateMCPTool(t *testing.T) {
	t.Parallel()
	ev := startEverything(t, 0)
	rec := recordMCP(t, ev.url)
	script := writeScript(t, "[depth 0]\ncall everything/echo {\"message\":\"gated hello\"}\nanswer \"{transcript}\"\n")
	flags := []string{"--log-content", "--mcp", "everything=" + rec.url, "--mcp-tools", "everything=echo", "--mcp-tags", "everything=none",
		"--intelligence", "builtin:script=" + script, "--approve", "tool:everything/echo"}
	s := startService(t, flags...)
	mcpReady(t, s)
	ctx := context.Background()
	const args = "map[message:gated hello]"

	v03 := s.client(t)
	res, err := v03.SendMessage(ctx, textMessage("echo it"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	approvalOf(t, task, "everything/echo", args, "0")
	if got := rec.toolCalls(); len(got) != 0 {
		t.Fatalf("the MCP server got %v before the approval", got)
	}
	res, err = v03.SendMessage(ctx, answerTo(task, "yes"))
	if err != nil {
		t.Fatal(err)
	}
	done := res.(*a2a.Task)
	if done.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(done), "Echo: gated hello") {
		t.Fatalf("approved: %s %q", done.Status.State, artifactText(done))
	}
	if got := rec.toolCalls(); len(got) != 1 || got[0] != "echo" {
		t.Fatalf("the MCP server got the calls %v, want echo once", got)
	}

	v10 := a2acall.NewV1(s.url+"/", http.DefaultClient, a2acall.Options{})
	res, err = v10.SendMessage(ctx, textMessage("echo it again"))
	if err != nil {
		t.Fatal(err)
	}
	task = res.(*a2a.Task)
	approvalOf(t, task, "everything/echo", args, "0")
	res, err = v10.SendMessage(ctx, answerTo(task, "no"))
	if err != nil {
		t.Fatal(err)
	}
	done = res.(*a2a.Task)
	denial := `everything/echo was not run: the person asked did not approve it (answered "no")`
	if done.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(done), denial) || strings.Contains(artifactText(done), "Echo:") {
		t.Fatalf("denied: %s %q", done.Status.State, artifactText(done))
	}
	if got := rec.toolCalls(); len(got) != 1 {
		t.Fatalf("the MCP server got the calls %v after the denial, want the approved one alone", got)
	}
	// The child's log lines reach the service's log on their own path, after
	// its result: wait for both.
	var seen []map[string]any
	testkit.WaitFor(t, 10*time.Second, "the model's view of both calls logged", func() bool {
		seen = observed(s, "0", "everything/echo")
		return len(seen) >= 2
	})
	if len(seen) != 2 || seen[1]["is_error"] != true || !strings.Contains(str(seen[1], "text"), denial) {
		t.Fatalf("what the model saw of everything/echo: %v, want the result, then the denial as an error", seen)
	}

	ev2 := startEverything(t, 0)
	rec2 := recordMCP(t, ev2.url)
	flags[2] = "everything=" + rec2.url
	timed := startService(t, append(flags, "--input-timeout", "300ms")...)
	mcpReady(t, timed)
	var states []a2a.TaskState
	var id a2a.TaskID
	for e, err := range timed.client(t).SendStreamingMessage(ctx, textMessage("echo it")) {
		if err != nil {
			t.Fatal(err)
		}
		switch v := e.(type) {
		case *a2a.Task:
			id = v.ID
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, v.Status.State)
			if v.Status.State == a2a.TaskStateInputRequired {
				approvalOf(t, &a2a.Task{ID: v.TaskID, Status: v.Status}, "everything/echo", args, "0")
			}
		}
	}
	if len(states) < 2 || states[len(states)-2] != a2a.TaskStateInputRequired || states[len(states)-1] != a2a.TaskStateFailed {
		t.Fatalf("the unanswered approval's stream: %v, want input-required, then failed", states)
	}
	got, err := timed.client(t).GetTask(ctx, &a2a.TaskQueryParams{ID: id})
	if err != nil || got.Metadata[api.MetaCause] != api.CauseInputTimeout {
		t.Fatalf("the unanswered approval: %+v %v, want cause %s", got, err, api.CauseInputTimeout)
	}
	if calls := rec2.toolCalls(); len(calls) != 0 {
		t.Fatalf("the MCP server got %v though no one approved", calls)
	}
}

// A gated peer: A's root spawns on peer B only with a yes. Granted (a 1.0
// stream, the answer a 1.0 SendMessage), B runs the child and A's root gets
// its answer; denied (0.3 message/send), B gets nothing and A's root the
// error result.
func TestApprovalGatePeer(t *testing.T) {
	t.Parallel()
	b := startService(t, "--intelligence", "builtin:script="+writeScript(t, "[default]\nanswer \"b did: {objective}\"\n"))
	a := startService(t, "--peer", "b="+b.url, "--approve", "peer:b", "--log-content",
		"--intelligence", "builtin:script="+writeScript(t, "[depth 0]\nspawn sync \"remote work\" provider=peer:b\nanswer \"root saw: {transcript}\"\n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	v10 := a2acall.NewV1(a.url+"/", http.DefaultClient, a2acall.Options{NonBlocking: true})
	var states []a2a.TaskState
	var id a2a.TaskID
	for e, err := range v10.SendStreamingMessage(ctx, textMessage("delegate it")) {
		if err != nil {
			t.Fatal(err)
		}
		switch v := e.(type) {
		case *a2a.Task:
			id = v.ID
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, v.Status.State)
			if v.Status.State != a2a.TaskStateInputRequired {
				continue
			}
			m := v.Status.Message
			var args struct {
				Provider string `json:"provider"`
				Contract struct {
					Objective string `json:"objective"`
				} `json:"contract"`
			}
			raw, _ := json.Marshal(m.Metadata[api.MetaAskArguments])
			if m.Metadata[api.MetaAskTool] != api.ToolSpawn || json.Unmarshal(raw, &args) != nil || args.Provider != "peer:b" || args.Contract.Objective != "remote work" {
				t.Fatalf("the gated spawn: %+v", m)
			}
			if n := taskCount(t, b); n != 0 {
				t.Fatalf("B holds %d tasks before the approval", n)
			}
			if _, err := v10.SendMessage(ctx, answerTo(&a2a.Task{ID: v.TaskID, ContextID: v.ContextID}, "yes")); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := v10.GetTask(ctx, &a2a.TaskQueryParams{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if !containsInOrder(states, a2a.TaskStateInputRequired, a2a.TaskStateWorking, a2a.TaskStateCompleted) || !strings.Contains(artifactText(got), "b did: remote work") {
		t.Fatalf("approved: states %v, artifact %q", states, artifactText(got))
	}
	if n := taskCount(t, b); n != 1 {
		t.Fatalf("B holds %d tasks after the approval, want 1", n)
	}

	v03 := a.client(t)
	res, err := v03.SendMessage(ctx, textMessage("delegate it again"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Status.State != a2a.TaskStateInputRequired || task.Status.Message.Metadata[api.MetaAskTool] != api.ToolSpawn {
		t.Fatalf("the second gated spawn: %s %+v", task.Status.State, task.Status.Message)
	}
	res, err = v03.SendMessage(ctx, answerTo(task, "no"))
	if err != nil {
		t.Fatal(err)
	}
	done := res.(*a2a.Task)
	denial := `subagent.spawn was not run: the person asked did not approve it (answered "no")`
	if done.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(done), denial) {
		t.Fatalf("denied: %s %q", done.Status.State, artifactText(done))
	}
	if n := taskCount(t, b); n != 1 {
		t.Fatalf("B holds %d tasks after the denial, want still 1", n)
	}
	var seen []map[string]any
	testkit.WaitFor(t, 10*time.Second, "A's root's view of both spawns logged", func() bool {
		seen = observed(a, "0", api.ToolSpawn)
		return len(seen) >= 2
	})
	if len(seen) != 2 || seen[1]["is_error"] != true {
		t.Fatalf("what A's root saw of its spawns: %v, want the result, then the denial as an error", seen)
	}
	testkit.WaitFor(t, 10*time.Second, "A's children gone", func() bool { return len(testkit.Children(a.cmd.Process.Pid)) == 0 })
}

// containsInOrder reports whether want occur in got in this order (not
// necessarily next to each other).
func containsInOrder(got []a2a.TaskState, want ...a2a.TaskState) bool {
	for _, s := range got {
		if len(want) > 0 && s == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}
