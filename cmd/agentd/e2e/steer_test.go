package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// Issue 32.5: steering a running subagent (a message that joins its
// conversation before its next model call), by the parent's model and by an
// operator, and pausing one subtree.

// steeredChild is a child that works (a turn every 50ms) until a steering
// message joins its conversation, then answers with it.
const steeredChild = "steered \"child got: {steers}\"\n"

// opCall calls an operator method on s (loopback development mode: the
// anonymous caller is an operator) and decodes its result into out; it
// returns the JSON-RPC error, if any.
func opCall(t *testing.T, s *service, method string, params, out any) *rpcError {
	t.Helper()
	r, err := callRPC(t, http.DefaultClient, s.url, method, params, nil)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if r.Error != nil {
		b, _ := json.Marshal(r.Error)
		var e rpcError
		json.Unmarshal(b, &e)
		return &e
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			t.Fatalf("%s: decode %s: %v", method, r.Result, err)
		}
	}
	return nil
}

// treeNode returns the live node at agent path, if any.
func treeNode(t *testing.T, s *service, path string) (api.TreeNode, bool) {
	t.Helper()
	var tr api.TreeResult
	if e := opCall(t, s, api.OpTree, nil, &tr); e != nil {
		t.Fatalf("a2a.Tree: %+v", e)
	}
	for _, n := range tr.Nodes {
		if n.AgentPath == path {
			return n, true
		}
	}
	return api.TreeNode{}, false
}

// The parent's model steers the child it spawned (subagent.steer): the
// message is in the child's next request, and the child answers with it.
func TestSteerByTheParentsModel(t *testing.T) {
	t.Parallel()
	script := "[depth 0]\nspawn async \"child\"\nsteer 1 \"from the parent\"\nawait\nanswer \"root: {results} | {transcript}\"\n[depth 1]\n" + steeredChild
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, script))
	res, err := s.client(t).SendMessage(context.Background(), textMessage("go"))
	if err != nil {
		t.Fatal(err)
	}
	done := res.(*a2a.Task)
	if done.Status.State != a2a.TaskStateCompleted || !strings.HasPrefix(artifactText(done), "root: child got: from the parent |") {
		t.Fatalf("steered by the parent: %s %q", done.Status.State, artifactText(done))
	}
	if !strings.Contains(artifactText(done), "it joins its conversation before its next model call") {
		t.Fatalf("the parent's subagent.steer result is not in its transcript: %q", artifactText(done))
	}
	if lineCount(s, "subagent steered") != 1 || lineCount(s, "steering messages joined the conversation") != 1 {
		t.Fatalf("the steer was not logged once by the supervisor and once by the child")
	}
}

// An operator steers a running child at depth 1 (a2a.Steer): the child's
// next request carries the message; the call is audited; a steer to an
// unknown or ended handle, or with no text, is refused and changes nothing.
func TestSteerByTheOperator(t *testing.T) {
	t.Parallel()
	script := "[depth 0]\nspawn async \"child\"\nawait\nanswer \"root: {results}\"\n[depth 1]\n" + steeredChild
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, script))
	res, err := s.client(t).SendMessage(context.Background(), nonBlocking(textMessage("go")))
	if err != nil {
		t.Fatal(err)
	}
	root := res.(*a2a.Task).ID
	var child api.TreeNode
	testkit.WaitFor(t, 10*time.Second, "the child running", func() bool {
		n, ok := treeNode(t, s, "0.1")
		child = n
		return ok && n.Status == "running"
	})
	if !child.Steerable || child.NotSteerable != "" {
		t.Fatalf("a2a.Tree: the running local child is not steerable: %+v", child)
	}

	// Refused, nothing sent: an unknown handle, no text, too long a text.
	for _, bad := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"handle": "no-such-task", "text": "hello"}, "no live subagent"},
		{map[string]any{"handle": child.TaskID, "text": "  "}, "the message has no text"},
		{map[string]any{"handle": child.TaskID, "text": strings.Repeat("x", api.MaxSteer+1)}, "over the limit"},
		{map[string]any{"text": "hello"}, "handle is required"},
	} {
		e := opCall(t, s, api.OpSteer, bad.params, nil)
		if e == nil || e.Code != -32602 || !strings.Contains(e.Message, bad.want) {
			t.Fatalf("a2a.Steer %v: %+v, want -32602 %q", bad.params["handle"], e, bad.want)
		}
	}
	if n := lineCount(s, "subagent steered"); n != 0 {
		t.Fatalf("%d steers logged after refusals only", n)
	}

	var sr api.SteerResult
	if e := opCall(t, s, api.OpSteer, api.SteerParams{Handle: child.TaskID, Text: "from the operator"}, &sr); e != nil {
		t.Fatalf("a2a.Steer: %+v", e)
	}
	if sr.Handle != child.TaskID || sr.AgentPath != "0.1" || sr.Provider != "local" || sr.Queued < 1 {
		t.Fatalf("a2a.Steer's result: %+v", sr)
	}
	var final *a2a.Task
	testkit.WaitFor(t, 10*time.Second, "the task completed", func() bool {
		final = getTask(t, s, root)
		return final.Status.State.Terminal()
	})
	if final.Status.State != a2a.TaskStateCompleted || artifactText(final) != "root: child got: from the operator" {
		t.Fatalf("steered by the operator: %s %q", final.Status.State, artifactText(final))
	}

	// The child has ended: refused.
	if e := opCall(t, s, api.OpSteer, api.SteerParams{Handle: child.TaskID, Text: "too late"}, nil); e == nil || !strings.Contains(e.Message, "no live subagent") {
		t.Fatalf("a2a.Steer to an ended child: %+v", e)
	}
	var audit api.AuditResult
	if e := opCall(t, s, api.OpAudit, map[string]any{"method": api.OpSteer}, &audit); e != nil {
		t.Fatalf("a2a.Audit: %+v", e)
	}
	ok := 0
	for _, r := range audit.Records {
		if r.Outcome == "ok" && r.Target == child.TaskID {
			ok++
		}
	}
	if ok != 1 || len(audit.Records) != 6 {
		t.Fatalf("a2a.Audit of a2a.Steer: %+v, want 6 records, one ok on the child", audit.Records)
	}
}

// a2a.Pause with a handle holds that subtree before its next model call
// while its sibling goes on; a2a.Tree shows it paused; a2a.Resume with the
// handle lets it finish.
func TestPauseOneSubtree(t *testing.T) {
	t.Parallel()
	script := "[depth 0]\nspawn async \"a\"\nspawn async \"b\"\nawait\nanswer \"root: {results}\"\n[depth 1]\n" + steeredChild
	s := startService(t, "--intelligence", "builtin:script="+writeScript(t, script))
	res, err := s.client(t).SendMessage(context.Background(), nonBlocking(textMessage("go")))
	if err != nil {
		t.Fatal(err)
	}
	root := res.(*a2a.Task).ID
	var a, b api.TreeNode
	testkit.WaitFor(t, 10*time.Second, "both children running", func() bool {
		var okA, okB bool
		a, okA = treeNode(t, s, "0.1")
		b, okB = treeNode(t, s, "0.2")
		return okA && okB && a.Status == "running" && b.Status == "running"
	})
	// agentd ctl pause HANDLE is a2a.Pause with the handle.
	if out, code := runCombined(t, "ctl", "pause", a.TaskID, "--to", s.url); code != 0 || !strings.Contains(out, "paused: true\naffected: 1\n") {
		t.Fatalf("ctl pause a: exit %d\n%s", code, out)
	}
	if n, _ := treeNode(t, s, "0.1"); n.Status != api.NodePaused {
		t.Fatalf("a2a.Tree: a is %q, want paused", n.Status)
	}
	if n, _ := treeNode(t, s, "0.2"); n.Status != "running" {
		t.Fatalf("a2a.Tree: b is %q, want running", n.Status)
	}
	for _, n := range []api.TreeNode{a, b} {
		if out, code := runCombined(t, "ctl", "steer", n.TaskID, "finish, "+n.AgentPath, "--to", s.url); code != 0 || !strings.Contains(out, "agent_path: "+n.AgentPath) {
			t.Fatalf("ctl steer %s: exit %d\n%s", n.AgentPath, code, out)
		}
	}
	// a, held, takes none of its messages: at most api.MaxSteerQueued wait,
	// the next is refused and nothing is sent.
	for i := 1; i < api.MaxSteerQueued; i++ {
		if e := opCall(t, s, api.OpSteer, api.SteerParams{Handle: a.TaskID, Text: "more"}, nil); e != nil {
			t.Fatalf("a2a.Steer %d of a held child: %+v", i+1, e)
		}
	}
	if e := opCall(t, s, api.OpSteer, api.SteerParams{Handle: a.TaskID, Text: "one too many"}, nil); e == nil || e.Code != -32602 || !strings.Contains(e.Message, "8 messages already wait") {
		t.Fatalf("a2a.Steer past the bound: %+v", e)
	}
	testkit.WaitFor(t, 10*time.Second, "b finished", func() bool {
		_, live := treeNode(t, s, "0.2")
		return !live
	})
	if n, live := treeNode(t, s, "0.1"); !live || n.Status != api.NodePaused {
		t.Fatalf("a after b finished: %+v (live %v), want still held, paused", n, live)
	}
	if st := getTask(t, s, root).Status.State; st != a2a.TaskStateWorking {
		t.Fatalf("the root: %s, want working", st)
	}
	// A resume of a handle that no pause named is refused.
	if e := opCall(t, s, api.OpResume, api.PauseParams{Handle: string(root)}, nil); e == nil || e.Code != -32602 || !strings.Contains(e.Message, "not paused") {
		t.Fatalf("a2a.Resume of a subtree not paused: %+v", e)
	}
	if out, code := runCombined(t, "ctl", "resume", a.TaskID, "--to", s.url); code != 0 || !strings.Contains(out, "paused: false\naffected: 1\n") {
		t.Fatalf("ctl resume a: exit %d\n%s", code, out)
	}
	var final *a2a.Task
	testkit.WaitFor(t, 10*time.Second, "the task completed", func() bool {
		final = getTask(t, s, root)
		return final.Status.State.Terminal()
	})
	if final.Status.State != a2a.TaskStateCompleted || artifactText(final) != "root: child got: finish, 0.1"+strings.Repeat("\nmore", api.MaxSteerQueued-1)+"\nchild got: finish, 0.2" {
		t.Fatalf("after the resume: %s %q", final.Status.State, artifactText(final))
	}
}

// A child delegated to a peer (agentd B) is steered by a follow-up message
// to B's task: B runs it as the task's next turn, and its answer comes back
// in A's result.
func TestSteerAPeerDelegation(t *testing.T) {
	t.Parallel()
	b := startService(t, "--intelligence", "builtin:script="+writeScript(t, "[default]\nsleep 1500ms\nanswer \"b got: {objective}\"\n"))
	script := "[depth 0]\nspawn async \"child\" provider=peer:b\nawait\nanswer \"root: {results}\"\n"
	a := startService(t, "--intelligence", "builtin:script="+writeScript(t, script), "--peer", "b="+b.url)
	res, err := a.client(t).SendMessage(context.Background(), nonBlocking(textMessage("go")))
	if err != nil {
		t.Fatal(err)
	}
	root := res.(*a2a.Task).ID
	var child api.TreeNode
	testkit.WaitFor(t, 10*time.Second, "the peer's task known", func() bool {
		n, ok := treeNode(t, a, "0.1")
		child = n
		return ok && n.Steerable
	})
	if child.Provider != "peer:b" {
		t.Fatalf("the child: %+v, want provider peer:b", child)
	}
	var sr api.SteerResult
	if e := opCall(t, a, api.OpSteer, api.SteerParams{Handle: child.TaskID, Text: "steered through the mesh"}, &sr); e != nil {
		t.Fatalf("a2a.Steer of the peer's child: %+v", e)
	}
	if sr.Provider != "peer:b" {
		t.Fatalf("a2a.Steer's result: %+v", sr)
	}
	var final *a2a.Task
	testkit.WaitFor(t, 20*time.Second, "A's task completed", func() bool {
		final = getTask(t, a, root)
		return final.Status.State.Terminal()
	})
	if final.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(final), "b got: steered through the mesh") {
		t.Fatalf("A's task after the steer: %s %q", final.Status.State, artifactText(final))
	}
}
