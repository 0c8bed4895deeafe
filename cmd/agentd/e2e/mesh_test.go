package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/internal/testkit"
)

// send sends text with message metadata and returns the finished task.
func sendWithMeta(t *testing.T, s *service, text string, meta map[string]any) *a2a.Task {
	t.Helper()
	p := textMessage(text)
	p.Message.Metadata = meta
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.client(t).SendMessage(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("result is %T", res)
	}
	return task
}

// taskCount is how many tasks a service holds, by A2A 1.0 ListTasks.
func taskCount(t *testing.T, s *service) int {
	t.Helper()
	var page struct {
		TotalSize int `json:"totalSize"`
	}
	rpc(t, s, "1.0", "ListTasks", `{}`, &page)
	return page.TotalSize
}

// Two agentd processes on loopback: A delegates to B (by an explicit provider
// in the message metadata, and by a routing rule on the skill), and B's result
// comes back as A's artifact, with B's usage.
func TestTwoAgentdDelegation(t *testing.T) {
	t.Parallel()
	b := startService(t)
	a := startService(t, "--peer", "b="+b.url, "--route", "research=peer:b")

	task := sendWithMeta(t, a, "three little words", map[string]any{"agentd/provider": "peer:b"})
	want := `"three little words" has 3 words and 18 characters`
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != want {
		t.Fatalf("A's task: %s %q, want completed %q", task.Status.State, artifactText(task), want)
	}
	usage, _ := task.Metadata["agentd/usage"].(map[string]any)
	if usage == nil || usage["tokens_out"].(float64) <= 0 {
		t.Fatalf("B's usage did not come back: %v", task.Metadata)
	}
	if n := taskCount(t, b); n != 1 {
		t.Fatalf("B holds %d tasks, want 1", n)
	}

	task = sendWithMeta(t, a, "by skill", map[string]any{"agentd/skill": "research"})
	if task.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(task), "2 words") {
		t.Fatalf("routed by skill: %s %q", task.Status.State, artifactText(task))
	}
	task = sendWithMeta(t, a, "stays local", nil)
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("local: %s", task.Status.State)
	}
	if n := taskCount(t, b); n != 2 {
		t.Fatalf("B holds %d tasks, want 2 (the third message ran on A)", n)
	}
}

func TestPlainA2AServerAsPeer(t *testing.T) {
	t.Parallel()
	peer := &a2atest.Executor{}
	a := startService(t, "--peer", "plain="+a2atest.Serve(t, a2asrv.NewHandler(peer), a2atest.Card, nil), "--route", "*=peer:plain")
	task := sendWithMeta(t, a, "hello plain peer", nil)
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "echo: hello plain peer" {
		t.Fatalf("task %s %q", task.Status.State, artifactText(task))
	}
	// A plain peer has no capabilities: a request that needs one is refused
	// loudly, never sent.
	p := textMessage("structured please")
	p.Message.Parts = append(p.Message.Parts, a2a.DataPart{Data: map[string]any{"agentd/delegation": map[string]any{
		"contract": map[string]any{"objective": "structured please", "output_format": map[string]any{"kind": "json", "schema": map[string]any{"type": "object"}}},
	}}})
	res, err := a.client(t).SendMessage(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	refused := res.(*a2a.Task)
	if refused.Status.State != a2a.TaskStateRejected || !strings.Contains(refused.Status.Message.Parts[0].(a2a.TextPart).Text, "UNSUPPORTED_CAPABILITY") {
		t.Fatalf("schema request to a plain peer: %s %v", refused.Status.State, refused.Status.Message)
	}
	if n := len(peer.Messages()); n != 1 {
		t.Fatalf("the plain peer got %d messages, want 1", n)
	}
}

// freePort is a port for a process that must be told it before it binds it
// (testkit.FreePort: below the ephemeral range, which the tests' other
// listeners are served from).
func freePort(t *testing.T) int {
	t.Helper()
	p, err := testkit.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A routes everything to B and B everything to A: the A to B to A cycle is
// refused, and A's task says so.
func TestMeshCycleRefused(t *testing.T) {
	t.Parallel()
	portA := freePort(t)
	urlA := fmt.Sprintf("http://127.0.0.1:%d", portA)
	b := startService(t, "--peer", "a="+urlA, "--route", "*=peer:a")
	a := startService(t, "--listen", fmt.Sprintf("127.0.0.1:%d", portA), "--peer", "b="+b.url, "--route", "*=peer:b")
	task := sendWithMeta(t, a, "go round", nil)
	if task.Status.State != a2a.TaskStateRejected {
		t.Fatalf("state %s, want rejected", task.Status.State)
	}
	if msg := task.Status.Message.Parts[0].(a2a.TextPart).Text; !strings.Contains(msg, "cycle") {
		t.Fatalf("status message %q does not name the cycle", msg)
	}
	if task.Metadata["agentd/status"] != "refused" {
		t.Fatalf("exact status %v", task.Metadata["agentd/status"])
	}
	if n := taskCount(t, a); n != 1 {
		t.Fatalf("A holds %d tasks: the cycle went round", n)
	}
}

// A peer that outlives the delegation's deadline: A's task ends deadline and
// the peer sees tasks/cancel.
func TestPeerPastTheDeadlineIsCancelled(t *testing.T) {
	t.Parallel()
	peer := &a2atest.Executor{Block: true}
	canceled := peer.Canceled()
	a := startService(t, "--peer", "slow="+a2atest.Serve(t, a2asrv.NewHandler(peer), a2atest.Card, nil), "--route", "*=peer:slow", "--deadline", "700ms")
	task := sendWithMeta(t, a, "never finishes", nil)
	if task.Status.State != a2a.TaskStateFailed || task.Metadata["agentd/status"] != "deadline" {
		t.Fatalf("state %s, status %v; want failed with agentd/status deadline", task.Status.State, task.Metadata["agentd/status"])
	}
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the peer never saw tasks/cancel")
	}
}

func TestMeshFlagsAreValidated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"--peer", "b=http://10.0.0.1:80"}, "--peer"},
		{[]string{"--peer", "b"}, "--peer"},
		{[]string{"--peer", "b=http://user:secret@127.0.0.1:1/"}, "token-file"},                    // no secret on argv
		{[]string{"--peer", "b=https://127.0.0.1:1/,spiffe=spiffe://example.org/b"}, "--tls-cert"}, // mTLS needs an SVID of our own
		{[]string{"--peer", "b=http://127.0.0.1:1/,spiffe=spiffe://example.org/b"}, "https"},
		{[]string{"--peer", "b=http://127.0.0.1:1/,version=2.0"}, "version="},
		{[]string{"--peer", "b=http://127.0.0.1:1/,binding=SOAP"}, "binding="},
		{[]string{"--peer", "b=http://127.0.0.1:1/,version=0.3,binding=GRPC"}, "--peer b"}, // a transport agentd does not call
		{[]string{"--route", "x=peer:nobody"}, "--route"},
		{[]string{"--route", "nonsense"}, "--route"},
		{[]string{"--push-allow-net", "10.0.0.0/33"}, "--push-allow-net"},
		{[]string{"--send-wait", "-1s"}, "--send-wait"},
		{[]string{"--intelligence", "builtin:demo=forever"}, "--intelligence"},
	} {
		args := append([]string{"serve", "--listen", "127.0.0.1:0"}, tc.args...)
		wantUsageError(t, "", tc.name, args...)
	}
}
