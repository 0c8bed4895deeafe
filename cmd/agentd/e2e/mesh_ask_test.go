package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// Issue 32.2: a peer's task that stops to ask (input-required,
// auth-required) asks through the delegation: the question goes up as a
// subagent's does, and the answer goes to the peer's task.

// askingPeerScript is agentd B's: its root passes up the question of its
// child (B's 0.1), which asks "Which color?", red or blue.
const askingPeerScript = "[depth 0]\nspawn sync \"child\"\npass 1\nawait\nanswer \"B root: {results}\"\n" +
	"[depth 1]\nask \"Which color?\" choices=red,blue\nanswer \"B child got {answer}\"\n"

// askMeshBindings are the transports A calls B over in the asking tests.
var askMeshBindings = []struct{ name, pin, chosen string }{
	{"jsonrpc10", "version=1.0,binding=JSONRPC", "1.0/JSONRPC"},
	{"jsonrpc03", "version=0.3,binding=JSONRPC", "0.3/JSONRPC"},
	{"httpjson", "binding=HTTP+JSON", "1.0/HTTP+JSON"},
	{"grpc", "binding=GRPC", "1.0/GRPC"},
}

// questionAt checks that task stopped at state with the question text, the
// asker's path and the choices (fmt.Sprint of them; "" for none).
func questionAt(t *testing.T, task *a2a.Task, state a2a.TaskState, text, path, choices string) {
	t.Helper()
	if task.Status.State != state || task.Status.Message == nil {
		t.Fatalf("task %s: %+v, want %s with the question", task.ID, task.Status, state)
	}
	m := task.Status.Message
	if txt := m.Parts[0].(a2a.TextPart).Text; txt != text {
		t.Fatalf("the question = %q, want %q", txt, text)
	}
	if got := m.Metadata[api.MetaAskPath]; got != path {
		t.Fatalf("%s = %v, want %s", api.MetaAskPath, got, path)
	}
	got := ""
	if c, ok := m.Metadata[api.MetaAskChoices]; ok {
		got = fmt.Sprint(c)
	}
	if got != choices {
		t.Fatalf("%s = %q, want %q", api.MetaAskChoices, got, choices)
	}
}

// agentd A delegating to agentd B, whose subagent (B's 0.1) asks. A's model
// spawns a child on B over each binding (JSON-RPC 1.0 and 0.3, HTTP+JSON,
// gRPC) and passes each child's question up: A's caller (a blocking send)
// sees the task input-required with B's question, its asker's path joined
// under A's child (0.N.1), answers, sees the next, and the answers reach B's
// asker (each child's result is B's, with the answer in it). A message
// routed to B over each binding, blocking and streamed, does the same: A's
// task goes input-required with B's question (path 0.1, B's own), and the
// answer, sent to A's task, completes it. A cancel of A's task while B's
// question waits stops B's tree.
func TestMeshAskAcrossAgentd(t *testing.T) {
	t.Parallel()
	b := startService(t, "--intelligence", "builtin:script="+writeScript(t, askingPeerScript))
	script := "[depth 0]\n"
	args := []string{}
	for i, mb := range askMeshBindings {
		args = append(args, "--peer", "b-"+mb.name+"="+b.url+",timeout=10s,"+mb.pin)
		script += fmt.Sprintf("spawn sync \"via %s\" provider=peer:b-%s\npass %d\nawait\n", mb.name, mb.name, i+1)
	}
	script += "answer \"A root: {results}\"\n"
	a := startService(t, append(args, "--intelligence", "builtin:script="+writeScript(t, script))...)
	c := a.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	t.Run("spawned", func(t *testing.T) {
		res, err := c.SendMessage(ctx, textMessage("pick colors"))
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		var want []string
		for i, mb := range askMeshBindings {
			questionAt(t, task, a2a.TaskStateInputRequired, "Which color?", fmt.Sprintf("0.%d.1", i+1), "[red blue]")
			color := "color-" + mb.name
			want = append(want, "B root: B child got "+color)
			res, err = c.SendMessage(ctx, answerTo(task, color))
			if err != nil {
				t.Fatalf("the answer over %s: %v", mb.name, err)
			}
			task = res.(*a2a.Task)
		}
		if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "A root: "+strings.Join(want, "\n") {
			t.Fatalf("after the answers: %s %q", task.Status.State, artifactText(task))
		}
		for _, mb := range askMeshBindings {
			if got := chosen(a, "b-"+mb.name); got != mb.chosen {
				t.Fatalf("A called peer:b-%s over %q, want %s", mb.name, got, mb.chosen)
			}
		}
	})

	for _, mb := range askMeshBindings {
		meta := map[string]any{"agentd/provider": "peer:b-" + mb.name}
		t.Run("routed-blocking-"+mb.name, func(t *testing.T) {
			p := textMessage("routed " + mb.name)
			p.Message.Metadata = meta
			res, err := c.SendMessage(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			task := res.(*a2a.Task)
			questionAt(t, task, a2a.TaskStateInputRequired, "Which color?", "0.1", "[red blue]")
			res, err = c.SendMessage(ctx, answerTo(task, "blue"))
			if err != nil {
				t.Fatal(err)
			}
			done := res.(*a2a.Task)
			if done.Status.State != a2a.TaskStateCompleted || artifactText(done) != "B root: B child got blue" {
				t.Fatalf("after the answer: %s %q (%+v)", done.Status.State, artifactText(done), done.Status.Message)
			}
		})
		t.Run("routed-streaming-"+mb.name, func(t *testing.T) {
			p := textMessage("streamed " + mb.name)
			p.Message.Metadata = meta
			var states []a2a.TaskState
			var last *a2a.Task
			for ev, err := range c.SendStreamingMessage(ctx, p) {
				if err != nil {
					t.Fatal(err)
				}
				switch v := ev.(type) {
				case *a2a.Task:
					states, last = append(states, v.Status.State), v
				case *a2a.TaskStatusUpdateEvent:
					states = append(states, v.Status.State)
					if v.Status.State != a2a.TaskStateInputRequired {
						continue
					}
					asked := &a2a.Task{ID: v.TaskID, ContextID: v.ContextID, Status: v.Status}
					questionAt(t, asked, a2a.TaskStateInputRequired, "Which color?", "0.1", "[red blue]")
					res, err := c.SendMessage(ctx, nonBlocking(answerTo(asked, "red")))
					if err != nil {
						t.Fatal(err)
					}
					if got := res.(*a2a.Task).Status.State; got != a2a.TaskStateWorking {
						t.Fatalf("the answer's send: %s, want working", got)
					}
					last = asked
				}
			}
			if len(states) < 3 || states[len(states)-1] != a2a.TaskStateCompleted || !slices.Contains(states, a2a.TaskStateInputRequired) {
				t.Fatalf("states = %v, want input-required then completed", states)
			}
			got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: last.ID})
			if err != nil {
				t.Fatal(err)
			}
			if artifactText(got) != "B root: B child got red" {
				t.Fatalf("the task's artifact: %q", artifactText(got))
			}
		})
	}

	// A caller's tasks/cancel while B's question waits cancels B's task:
	// B's tree (the asker and its root, waiting) is stopped.
	t.Run("cancel", func(t *testing.T) {
		p := textMessage("to be cancelled")
		p.Message.Metadata = map[string]any{"agentd/provider": "peer:b-grpc"}
		res, err := c.SendMessage(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		questionAt(t, task, a2a.TaskStateInputRequired, "Which color?", "0.1", "[red blue]")
		if n := len(testkit.Children(b.cmd.Process.Pid)); n != 2 {
			t.Fatalf("%d child processes of B while its child asks, want 2", n)
		}
		if got, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: task.ID}); err != nil || got.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("cancel: %+v %v", got, err)
		}
		testkit.WaitFor(t, 10*time.Second, "B's tree stopped", func() bool { return len(testkit.Children(b.cmd.Process.Pid)) == 0 })
	})

	// B's asker got each answer: its log says so at B's 0.1.
	answered := testkit.WithMsg(testkit.JSONLines(b.logs.String()), "question answered")
	if len(answered) == 0 {
		t.Fatal("B logged no answered question")
	}
}

// The JavaScript SDK 1.3.0's server as a peer that asks (peer-server.mjs):
// a message routed to it that it stops at input-required makes A's task
// input-required with its question and choices (the asker's path A's root:
// the peer is no agentd); the answer completes it with the peer's artifact,
// and the peer logs the answer. Its auth-required surfaces as auth-required
// with its text, and the caller's next message completes it too. A child
// spawned on it that asks is asking for A's root's model: the model passes
// an input question up; it cannot answer an authentication request (the
// error it sees says to pass it up), passes it up, and A's caller sees
// auth-required. A question with no text gets one naming the peer. Over
// JSON-RPC 1.0 and gRPC.
func TestJavaScriptSDKServerAsks(t *testing.T) {
	t.Parallel()
	js, jsOut := startJSPeerWith(t, "--grpc")
	a := startService(t, "--peer", "js="+js+",version=1.0,binding=JSONRPC", "--peer", "jsgrpc="+js+",binding=GRPC",
		"--intelligence", "builtin:script="+writeScript(t, `[depth 0]
spawn sync "ask me" provider=peer:jsgrpc
pass 1
await
spawn sync "auth first" provider=peer:js
reply 2 "my password"
pass 2
await
answer "root saw: {results} | {transcript}"
`))
	c := a.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, peer := range []string{"js", "jsgrpc"} {
		task := sendWithMeta(t, a, "ask about colors", map[string]any{"agentd/provider": "peer:" + peer})
		questionAt(t, task, a2a.TaskStateInputRequired, "Which color?", "0", "[red blue]")
		res, err := c.SendMessage(ctx, answerTo(task, "blue via "+peer))
		if err != nil {
			t.Fatal(err)
		}
		if done := res.(*a2a.Task); done.Status.State != a2a.TaskStateCompleted || artifactText(done) != "answered: blue via "+peer {
			t.Fatalf("%s: after the answer: %s %q %+v", peer, done.Status.State, artifactText(done), done.Status.Message)
		}
		testkit.WaitFor(t, 10*time.Second, "the peer's answer", func() bool { return strings.Contains(jsOut.String(), " blue via "+peer) })
	}
	if got := chosen(a, "jsgrpc"); got != "1.0/GRPC" {
		t.Fatalf("agentd chose %q for peer jsgrpc, want 1.0/GRPC", got)
	}

	task := sendWithMeta(t, a, "auth needed", map[string]any{"agentd/provider": "peer:js"})
	questionAt(t, task, a2a.TaskStateAuthRequired, "Sign in at the portal and send the code.", "0", "")
	res, err := c.SendMessage(ctx, answerTo(task, "code 4711"))
	if err != nil {
		t.Fatal(err)
	}
	if done := res.(*a2a.Task); done.Status.State != a2a.TaskStateCompleted || artifactText(done) != "authenticated: code 4711" {
		t.Fatalf("after the code: %s %q", done.Status.State, artifactText(done))
	}

	blank := sendWithMeta(t, a, "askblank", map[string]any{"agentd/provider": "peer:js"})
	if blank.Status.State != a2a.TaskStateInputRequired || blank.Status.Message == nil ||
		!strings.HasPrefix(blank.Status.Message.Parts[0].(a2a.TextPart).Text, "Peer js asks for input to go on") {
		t.Fatalf("a question with no text: %s %+v", blank.Status.State, blank.Status.Message)
	}
	if _, err := c.CancelTask(ctx, &a2a.TaskIDParams{ID: blank.ID}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the peer's task cancelled", func() bool { return strings.Contains(jsOut.String(), "cancelled ") })

	res, err = c.SendMessage(ctx, textMessage("spawn"))
	if err != nil {
		t.Fatal(err)
	}
	task = res.(*a2a.Task)
	questionAt(t, task, a2a.TaskStateInputRequired, "Which color?", "0.1", "[red blue]")
	if res, err = c.SendMessage(ctx, answerTo(task, "red")); err != nil {
		t.Fatal(err)
	}
	task = res.(*a2a.Task)
	questionAt(t, task, a2a.TaskStateAuthRequired, "Sign in at the portal and send the code.", "0.2", "")
	if res, err = c.SendMessage(ctx, answerTo(task, "code 99")); err != nil {
		t.Fatal(err)
	}
	done := res.(*a2a.Task)
	want := "root saw: answered: red\nauthenticated: code 99 | "
	if done.Status.State != a2a.TaskStateCompleted || !strings.HasPrefix(artifactText(done), want) ||
		!strings.Contains(artifactText(done), "waits for authentication a peer asks for") {
		t.Fatalf("after both answers: %s %q", done.Status.State, artifactText(done))
	}
}

// A question of a peer that waits past --input-timeout fails A's task
// (deadline, input_timeout), and the peer's task is cancelled.
func TestMeshAskInputTimeout(t *testing.T) {
	t.Parallel()
	js, jsOut := startJSPeer(t, false)
	a := startService(t, "--peer", "js="+js, "--input-timeout", "300ms")
	task := sendWithMeta(t, a, "ask and wait", map[string]any{"agentd/provider": "peer:js"})
	questionAt(t, task, a2a.TaskStateInputRequired, "Which color?", "0", "[red blue]")
	c := a.client(t)
	var got *a2a.Task
	var err error
	testkit.WaitFor(t, 20*time.Second, "the task ended", func() bool {
		got, err = c.GetTask(context.Background(), &a2a.TaskQueryParams{ID: task.ID})
		return err == nil && got.Status.State.Terminal()
	})
	if got.Status.State != a2a.TaskStateFailed || got.Metadata[api.MetaStatus] != string(api.StatusDeadline) || got.Metadata[api.MetaCause] != api.CauseInputTimeout {
		t.Fatalf("after the input timeout: %s %v, want failed, deadline, input_timeout", got.Status.State, got.Metadata)
	}
	testkit.WaitFor(t, 10*time.Second, "the peer's task cancelled", func() bool { return strings.Contains(jsOut.String(), "cancelled ") })
}

// The wait for a peer's answer does not count against the remote child's
// deadline: a child on the JavaScript peer with a 1 s deadline waits 2 s for
// its answer, then completes with it. With --input-charges-deadline it
// counts: the child ends at its deadline while it waits (status deadline),
// the peer's task is cancelled, and the task goes on without the answer.
func TestMeshAskWaitNotChargedToTheDeadline(t *testing.T) {
	t.Parallel()
	js, jsOut := startJSPeer(t, false)
	script := writeScript(t, "[depth 0]\nspawn sync \"ask me\" provider=peer:js deadline=1s\npass 1\nawait\nanswer \"root: {results}\"\n")
	a := startService(t, "--peer", "js="+js, "--intelligence", "builtin:script="+script)
	c := a.client(t)
	ctx := context.Background()
	sent := time.Now()
	res, err := c.SendMessage(ctx, textMessage("go"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	questionAt(t, task, a2a.TaskStateInputRequired, "Which color?", "0.1", "[red blue]")
	testkit.WaitFor(t, 20*time.Second, "2 s past the send, the task still waiting", func() bool {
		got, err := c.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
		if err != nil || got.Status.State != a2a.TaskStateInputRequired {
			t.Fatalf("while it waits: %+v %v", got, err)
		}
		return time.Since(sent) > 2*time.Second
	})
	if res, err = c.SendMessage(ctx, answerTo(task, "blue")); err != nil {
		t.Fatal(err)
	}
	if done := res.(*a2a.Task); done.Status.State != a2a.TaskStateCompleted || artifactText(done) != "root: answered: blue" {
		t.Fatalf("after the answer: %s %q", done.Status.State, artifactText(done))
	}

	charged := startService(t, "--peer", "js="+js, "--intelligence", "builtin:script="+script, "--input-charges-deadline")
	res, err = charged.client(t).SendMessage(ctx, textMessage("go"))
	if err != nil {
		t.Fatal(err)
	}
	questionAt(t, res.(*a2a.Task), a2a.TaskStateInputRequired, "Which color?", "0.1", "[red blue]")
	if child := nestedTask(t, charged, "0.1"); child.Metadata[api.MetaStatus] != string(api.StatusDeadline) {
		t.Fatalf("the charged child: %s %v, want deadline", child.Status.State, child.Metadata)
	}
	testkit.WaitFor(t, 10*time.Second, "the peer's task cancelled", func() bool { return strings.Contains(jsOut.String(), "cancelled ") })
}
