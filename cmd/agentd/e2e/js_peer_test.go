package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/internal/testkit"
)

// startJSPeer runs cmd/agentd/e2e/js/peer-server.mjs, an A2A 1.0 agent on
// the JavaScript SDK 1.3.0's server (with its 0.3 compatibility when
// compat), and returns its URL and its output after the first line. It is
// stopped and reaped at cleanup.
func startJSPeer(t *testing.T, compat bool) (string, *testkit.Buffer) {
	t.Helper()
	if compat {
		return startJSPeerWith(t, "--compat")
	}
	return startJSPeerWith(t)
}

// startJSPeerWith is startJSPeer with peer-server.mjs's flags.
func startJSPeerWith(t *testing.T, flags ...string) (string, *testkit.Buffer) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node (Node.js 20+) is required for the JavaScript SDK tests: install it, then run `make test`")
	}
	dir, _ := filepath.Abs("js")
	for _, mod := range []string{"a2a-js-10", "express"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", mod, "package.json")); err != nil {
			t.Fatalf("%s is not installed in cmd/agentd/e2e/js/node_modules: run `make test-deps` (it runs npm ci there)", mod)
		}
	}
	cmd := exec.Command(node, append([]string{"peer-server.mjs"}, flags...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string, 1)
	rest := &testkit.Buffer{}
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		for sc.Scan() {
			rest.Write([]byte(sc.Text() + "\n"))
		}
	}()
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(line, "listening ")
		if !ok {
			t.Fatalf("peer-server.mjs said %q, want \"listening URL\"", line)
		}
		return url, rest
	case <-time.After(30 * time.Second):
		t.Fatal("peer-server.mjs did not start within 30s")
	}
	return "", nil
}

// chosen returns the version and binding of the last "peer interface
// chosen" line of s's log for peer.
func chosen(s *service, peer string) string {
	got := ""
	for _, r := range testkit.WithMsg(testkit.JSONLines(s.logs.String()), "peer interface chosen") {
		if str(r, "peer") == peer {
			got = str(r, "version") + "/" + str(r, "binding")
		}
	}
	return got
}

// The JavaScript SDK 1.3.0's server as a peer, as its sample ships (A2A 1.0
// only, over JSON-RPC): agentd reads its 1.0 card and calls it in 1.0, so a
// spawn and a routed message come back with its answer. Pinned to 0.3,
// which it refuses, a spawn ends crashed and a routed message failed, both
// with cause peer_unsupported and a status naming the version and its
// refusal; past a deadline, the peer's task is cancelled; with the SDK's 0.3
// compatibility on, the same pin goes through, for a routed message and a
// spawn alike.
func TestJavaScriptSDKServerAsPeer(t *testing.T) {
	t.Parallel()
	js, jsOut := startJSPeer(t, false)
	a := startService(t, "--peer", "js="+js, "--peer", "js03="+js+",version=0.3,binding=JSONRPC",
		"--intelligence", "builtin:script="+writeScript(t, `[depth 0]
usage 0 0
spawn sync "remote work" provider=peer:js
usage 0 0
spawn sync "refused work" provider=peer:js03
answer "root saw: {transcript}"
`))

	task := sendWithMeta(t, a, "hello js", map[string]any{"agentd/provider": "peer:js"})
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "echo: hello js" {
		t.Fatalf("routed message: %s %q %v", task.Status.State, artifactText(task), task.Status.Message)
	}
	if got := chosen(a, "js"); got != "1.0/JSONRPC" {
		t.Fatalf("agentd chose %q for the JavaScript peer, want 1.0/JSONRPC", got)
	}

	root := sendWithMeta(t, a, "go", nil)
	if root.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(root), "echo: remote work") {
		t.Fatalf("spawn on the JavaScript peer: %s %q", root.Status.State, artifactText(root))
	}
	if remote := nestedTask(t, a, "0.1"); remote.Status.State != a2a.TaskStateCompleted || artifactText(remote) != "echo: remote work" || remote.Metadata["agentd/provider"] != "peer:js" {
		t.Fatalf("nested task 0.1: %s %q %v", remote.Status.State, artifactText(remote), remote.Metadata)
	}

	if child := nestedTask(t, a, "0.2"); child.Status.State != a2a.TaskStateFailed || child.Metadata["agentd/cause"] != "peer_unsupported" || child.Metadata["agentd/status"] != "crashed" {
		t.Fatalf("a spawn the peer refuses: %s %v", child.Status.State, child.Metadata)
	}

	refused := sendWithMeta(t, a, "in 0.3 please", map[string]any{"agentd/provider": "peer:js03"})
	status := ""
	if refused.Status.Message != nil {
		status = refused.Status.Message.Parts[0].(a2a.TextPart).Text
	}
	if refused.Status.State != a2a.TaskStateFailed || refused.Metadata["agentd/cause"] != "peer_unsupported" ||
		!strings.Contains(status, "refused A2A 0.3 over JSONRPC") || !strings.Contains(status, "its card offers 1.0/JSONRPC") || !strings.Contains(status, "-32009") {
		t.Fatalf("a delegation the peer refuses: %s, cause %v, status %q", refused.Status.State, refused.Metadata["agentd/cause"], status)
	}

	// Past the delegation's deadline, the peer's task is cancelled in 1.0
	// (CancelTask), after following it by SubscribeToTask.
	c := startService(t, "--peer", "js="+js, "--deadline", "700ms")
	slow := sendWithMeta(t, c, "slow down", map[string]any{"agentd/provider": "peer:js"})
	if slow.Status.State != a2a.TaskStateFailed || slow.Metadata["agentd/status"] != "deadline" {
		t.Fatalf("past the deadline: %s %v", slow.Status.State, slow.Metadata)
	}
	testkit.WaitFor(t, 10*time.Second, "the JavaScript peer's cancel", func() bool { return strings.Contains(jsOut.String(), "cancelled ") })

	compat, _ := startJSPeer(t, true)
	b := startService(t, "--peer", "js03="+compat+",version=0.3", "--peer", "js="+compat,
		"--intelligence", "builtin:script="+writeScript(t, `[depth 0]
usage 0 0
spawn sync "old work" provider=peer:js03
answer "root saw: {transcript}"
`))
	for _, peer := range []string{"js03", "js"} {
		task := sendWithMeta(t, b, "hello "+peer, map[string]any{"agentd/provider": "peer:" + peer})
		if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "echo: hello "+peer {
			t.Fatalf("routed to %s (0.3 compatibility on): %s %q %v", peer, task.Status.State, artifactText(task), task.Status.Message)
		}
	}
	root = sendWithMeta(t, b, "go", nil)
	if child := nestedTask(t, b, "0.1"); root.Status.State != a2a.TaskStateCompleted || child.Status.State != a2a.TaskStateCompleted || artifactText(child) != "echo: old work" {
		t.Fatalf("spawn on the JavaScript peer in 0.3: root %s, child %s %q", root.Status.State, child.Status.State, artifactText(child))
	}
	if v03, v10 := chosen(b, "js03"), chosen(b, "js"); v03 != "0.3/JSONRPC" || v10 != "1.0/JSONRPC" {
		t.Fatalf("with the 0.3 compatibility on: chose %q (pinned 0.3) and %q; want 0.3/JSONRPC and 1.0/JSONRPC", v03, v10)
	}
}

// The JavaScript SDK 1.3.0's server as a peer over HTTP+JSON (its
// restHandler, which its card lists first): agentd chooses 1.0 over
// HTTP+JSON from the card, a routed message and a spawn come back with its
// answer, and past a deadline its task is cancelled over the binding; with
// its 0.3 compatibility on, the same, and 0.3 pinned goes over JSON-RPC;
// pinned to HTTP+JSON, a peer serving none refuses with a cause.
func TestJavaScriptSDKServerAsPeerOverHTTPJSON(t *testing.T) {
	t.Parallel()
	js, jsOut := startJSPeerWith(t, "--rest")
	a := startService(t, "--peer", "js="+js,
		"--intelligence", "builtin:script="+writeScript(t, `[depth 0]
usage 0 0
spawn sync "remote work" provider=peer:js
answer "root saw: {transcript}"
`))
	task := sendWithMeta(t, a, "hello rest", map[string]any{"agentd/provider": "peer:js"})
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "echo: hello rest" {
		t.Fatalf("routed message: %s %q %v", task.Status.State, artifactText(task), task.Status.Message)
	}
	if got := chosen(a, "js"); got != "1.0/HTTP+JSON" {
		t.Fatalf("agentd chose %q for the JavaScript peer, want 1.0/HTTP+JSON", got)
	}
	root := sendWithMeta(t, a, "go", nil)
	if remote := nestedTask(t, a, "0.1"); root.Status.State != a2a.TaskStateCompleted || remote.Status.State != a2a.TaskStateCompleted || artifactText(remote) != "echo: remote work" {
		t.Fatalf("spawn on the JavaScript peer: root %s %q, child %s %q", root.Status.State, artifactText(root), remote.Status.State, artifactText(remote))
	}

	c := startService(t, "--peer", "js="+js+",binding=HTTP+JSON", "--deadline", "700ms")
	slow := sendWithMeta(t, c, "slow down", map[string]any{"agentd/provider": "peer:js"})
	if slow.Status.State != a2a.TaskStateFailed || slow.Metadata["agentd/status"] != "deadline" {
		t.Fatalf("past the deadline: %s %v", slow.Status.State, slow.Metadata)
	}
	testkit.WaitFor(t, 10*time.Second, "the JavaScript peer's cancel", func() bool { return strings.Contains(jsOut.String(), "cancelled ") })

	// With its 0.3 compatibility on, the card still leads to 1.0 over
	// HTTP+JSON, and a peer pinned to 0.3 goes over JSON-RPC.
	compat, _ := startJSPeerWith(t, "--rest", "--compat")
	b := startService(t, "--peer", "js="+compat, "--peer", "js03="+compat+",version=0.3")
	for _, peer := range []string{"js", "js03"} {
		task := sendWithMeta(t, b, "hello "+peer, map[string]any{"agentd/provider": "peer:" + peer})
		if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "echo: hello "+peer {
			t.Fatalf("routed to %s (0.3 compatibility on): %s %q %v", peer, task.Status.State, artifactText(task), task.Status.Message)
		}
	}
	if v10, v03 := chosen(b, "js"), chosen(b, "js03"); v10 != "1.0/HTTP+JSON" || v03 != "0.3/JSONRPC" {
		t.Fatalf("with the 0.3 compatibility on: chose %q and %q (pinned 0.3); want 1.0/HTTP+JSON and 0.3/JSONRPC", v10, v03)
	}

	// Pinned to HTTP+JSON, a peer that serves none (the sample as it ships)
	// refuses with a cause naming the binding and what its card offers.
	plain, _ := startJSPeer(t, false)
	d := startService(t, "--peer", "js="+plain+",version=1.0,binding=HTTP+JSON")
	refused := sendWithMeta(t, d, "over rest please", map[string]any{"agentd/provider": "peer:js"})
	status := ""
	if refused.Status.Message != nil {
		status = refused.Status.Message.Parts[0].(a2a.TextPart).Text
	}
	if refused.Status.State != a2a.TaskStateFailed || refused.Metadata["agentd/cause"] != "peer_unsupported" ||
		!strings.Contains(status, "refused A2A 1.0 over HTTP+JSON") || !strings.Contains(status, "its card offers 1.0/JSONRPC") {
		t.Fatalf("a binding the peer does not serve: %s, cause %v, status %q", refused.Status.State, refused.Metadata["agentd/cause"], status)
	}
}

// The JavaScript SDK 1.3.0's server as a peer over gRPC (its grpcService on
// @grpc/grpc-js, on a port of its own, which its card lists first as
// host:port): agentd chooses 1.0 over gRPC from the card, unpinned, and
// calls that port on the peer's host; a routed message and a spawn come
// back with its answer, and past a deadline its task is cancelled over the
// binding. With the SDK's 0.3 compatibility on (its legacy gRPC service and
// 0.3 JSON-RPC beside), the card still leads to 1.0 over gRPC, and a peer
// pinned to 0.3 goes over JSON-RPC. Pinned to gRPC, a peer serving none
// refuses with a cause.
func TestJavaScriptSDKServerAsPeerOverGRPC(t *testing.T) {
	t.Parallel()
	js, jsOut := startJSPeerWith(t, "--grpc")
	a := startService(t, "--peer", "js="+js,
		"--intelligence", "builtin:script="+writeScript(t, `[depth 0]
usage 0 0
spawn sync "remote work" provider=peer:js
answer "root saw: {transcript}"
`))
	task := sendWithMeta(t, a, "hello grpc", map[string]any{"agentd/provider": "peer:js"})
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "echo: hello grpc" {
		t.Fatalf("routed message: %s %q %v", task.Status.State, artifactText(task), task.Status.Message)
	}
	if got := chosen(a, "js"); got != "1.0/GRPC" {
		t.Fatalf("agentd chose %q for the JavaScript peer, want 1.0/GRPC", got)
	}
	root := sendWithMeta(t, a, "go", nil)
	if remote := nestedTask(t, a, "0.1"); root.Status.State != a2a.TaskStateCompleted || remote.Status.State != a2a.TaskStateCompleted || artifactText(remote) != "echo: remote work" {
		t.Fatalf("spawn on the JavaScript peer: root %s %q, child %s %q", root.Status.State, artifactText(root), remote.Status.State, artifactText(remote))
	}

	c := startService(t, "--peer", "js="+js+",binding=GRPC", "--deadline", "700ms")
	slow := sendWithMeta(t, c, "slow down", map[string]any{"agentd/provider": "peer:js"})
	if slow.Status.State != a2a.TaskStateFailed || slow.Metadata["agentd/status"] != "deadline" {
		t.Fatalf("past the deadline: %s %v", slow.Status.State, slow.Metadata)
	}
	testkit.WaitFor(t, 10*time.Second, "the JavaScript peer's cancel", func() bool { return strings.Contains(jsOut.String(), "cancelled ") })

	compat, _ := startJSPeerWith(t, "--grpc", "--compat")
	b := startService(t, "--peer", "js="+compat, "--peer", "js03="+compat+",version=0.3")
	for _, peer := range []string{"js", "js03"} {
		task := sendWithMeta(t, b, "hello "+peer, map[string]any{"agentd/provider": "peer:" + peer})
		if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != "echo: hello "+peer {
			t.Fatalf("routed to %s (0.3 compatibility on): %s %q %v", peer, task.Status.State, artifactText(task), task.Status.Message)
		}
	}
	if v10, v03 := chosen(b, "js"), chosen(b, "js03"); v10 != "1.0/GRPC" || v03 != "0.3/JSONRPC" {
		t.Fatalf("with the 0.3 compatibility on: chose %q and %q (pinned 0.3); want 1.0/GRPC and 0.3/JSONRPC", v10, v03)
	}

	// Pinned to gRPC, a peer that serves none (the SDK's sample as it
	// ships: JSON-RPC only) is called at its URL and answers as HTTP/1.1:
	// the delegation fails with cause peer_unsupported, its status naming
	// the binding called, what the card offers and the transport's error.
	plain, _ := startJSPeer(t, false)
	d := startService(t, "--peer", "js="+plain+",version=1.0,binding=GRPC")
	refused := sendWithMeta(t, d, "over grpc please", map[string]any{"agentd/provider": "peer:js"})
	status := ""
	if refused.Status.Message != nil {
		status = refused.Status.Message.Parts[0].(a2a.TextPart).Text
	}
	if refused.Status.State != a2a.TaskStateFailed || refused.Metadata["agentd/cause"] != "peer_unsupported" ||
		!strings.Contains(status, "refused A2A 1.0 over GRPC") || !strings.Contains(status, "its card offers 1.0/JSONRPC") {
		t.Fatalf("a binding the peer does not serve: %s, cause %v, status %q", refused.Status.State, refused.Metadata["agentd/cause"], status)
	}
}
