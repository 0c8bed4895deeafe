package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

const opToken = "operator-token-0123456789"

// opService runs agentd on loopback http with an operator token and a probe
// listener; operator calls carry the token.
type opService struct {
	*service
	t         *testing.T
	tokenFile string
}

func startOpService(t *testing.T, args ...string) *opService {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(opToken+" operator admin\npeer-token-0123456789 peer ci\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "op-token")
	os.WriteFile(tokenFile, []byte(opToken), 0o600)
	// --drain-grace 5s: a loaded machine may need more than 200ms between a
	// child's result and its exit (args may set it again).
	all := append([]string{"--bearer-tokens-file", tokens, "--health-listen", "127.0.0.1:0", "--drain-grace", "5s"}, args...)
	return &opService{service: startService(t, all...), t: t, tokenFile: tokenFile}
}

var opAuth = map[string]string{"Authorization": "Bearer " + opToken}
var peerAuth = map[string]string{"Authorization": "Bearer peer-token-0123456789"}

// op calls an operator method and decodes its result into out.
func (s *opService) op(method string, params any, out any) {
	s.t.Helper()
	r, err := callRPC(s.t, http.DefaultClient, s.url, method, params, opAuth)
	if err != nil {
		s.t.Fatal(err)
	}
	if r.status != 200 || r.Error != nil {
		s.t.Fatalf("%s: status %d, error %+v, body %s", method, r.status, r.Error, r.body)
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			s.t.Fatalf("%s result %s: %v", method, r.Result, err)
		}
	}
}

// send starts a task without waiting and returns its id.
func (s *opService) send(text string) string {
	s.t.Helper()
	r, err := callRPC(s.t, http.DefaultClient, s.url, "message/send", sendParams(text, false), peerAuth)
	if err != nil || r.Error != nil {
		s.t.Fatalf("message/send: %v %+v", err, r.Error)
	}
	var task struct {
		ID string `json:"id"`
	}
	json.Unmarshal(r.Result, &task)
	return task.ID
}

// state returns a task's state.
func (s *opService) state(id string) string {
	s.t.Helper()
	r, err := callRPC(s.t, http.DefaultClient, s.url, "tasks/get", map[string]any{"id": id}, peerAuth)
	if err != nil || r.Error != nil {
		s.t.Fatalf("tasks/get: %v %+v", err, r.Error)
	}
	var task struct {
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	json.Unmarshal(r.Result, &task)
	return task.Status.State
}

func (s *opService) tree() api.TreeResult {
	s.t.Helper()
	var tr api.TreeResult
	s.op(api.OpTree, nil, &tr)
	return tr
}

// node returns the tree node of a task, if it is live.
func (s *opService) node(id string) (api.TreeNode, bool) {
	for _, n := range s.tree().Nodes {
		if n.TaskID == id {
			return n, true
		}
	}
	return api.TreeNode{}, false
}

func (s *opService) waitRunning(id string) api.TreeNode {
	s.t.Helper()
	var n api.TreeNode
	testkit.WaitFor(s.t, 20*time.Second, "task "+id+" running with a pid", func() bool {
		var ok bool
		n, ok = s.node(id)
		return ok && n.PID > 0 && n.Status == "running"
	})
	return n
}

func (s *opService) waitState(id, state string) {
	s.t.Helper()
	testkit.WaitFor(s.t, 20*time.Second, "task "+id+" "+state, func() bool { return s.state(id) == state })
}

func (s *opService) readyz(base string) int {
	s.t.Helper()
	return probe(s.t, http.DefaultClient, base+"/readyz")
}

func TestOperatorTreeAndCancel(t *testing.T) {
	t.Parallel()
	s := startOpService(t, "--intelligence", "builtin:wait")
	a, b := s.send("first"), s.send("second")
	na, nb := s.waitRunning(a), s.waitRunning(b)
	tr := s.tree()
	if len(tr.Nodes) != 2 || tr.Paused || tr.Draining {
		t.Fatalf("tree %+v", tr)
	}
	for _, n := range tr.Nodes {
		if n.AgentPath != "0" || n.Depth != 0 || n.Provider != "local" || n.Deadline.Before(time.Now()) {
			t.Errorf("node %+v", n)
		}
	}
	// The readable tree from agentd ctl.
	out, err := agentdCommand(t, "ctl", "tree", "--to", s.url, "--token-file", s.tokenFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "2 live subagents") || !strings.Contains(string(out), a+"  [running]") {
		t.Fatalf("ctl tree: %v\n%s", err, out)
	}

	// Cancel one handle: that subtree only.
	var c api.CancelResult
	s.op(api.OpCancel, map[string]any{"handle": a, "reason": "operator test"}, &c)
	if !c.Cancelled || c.SubtreeSize != 1 || c.Handle != a {
		t.Fatalf("cancel %s: %+v", a, c)
	}
	s.waitState(a, "canceled")
	testkit.WaitFor(t, 10*time.Second, "the cancelled child's group gone", func() bool { return testkit.GroupDead(na.PID) })
	if st := s.state(b); st != "working" {
		t.Fatalf("the other task is %s", st)
	}
	if !testkit.Alive(nb.PID) {
		t.Fatal("the other child died")
	}

	// Cancel "0": every live tree; the service keeps running.
	c2 := s.send("third")
	s.waitRunning(c2)
	s.op(api.OpCancel, map[string]any{"handle": "0"}, &c)
	if !c.Cancelled || c.SubtreeSize != 2 || c.Handle != "0" {
		t.Fatalf("cancel 0: %+v", c)
	}
	s.waitState(b, "canceled")
	s.waitState(c2, "canceled")
	testkit.WaitFor(t, 10*time.Second, "every child group gone", func() bool { return testkit.GroupDead(nb.PID) })
	// A task ends at its root's result; its node at the reap that follows.
	testkit.WaitFor(t, 10*time.Second, "every node gone", func() bool { return len(s.tree().Nodes) == 0 })
	d := s.send("after the cancel")
	s.waitRunning(d)
	s.op(api.OpCancel, nil, &c) // no params is "0" too
	if !c.Cancelled || c.SubtreeSize != 1 {
		t.Fatalf("cancel without params: %+v", c)
	}
	s.waitState(d, "canceled")
	if code := s.readyz("http://" + s.health); code != 200 {
		t.Fatalf("readyz %d after cancels", code)
	}
}

func TestOperatorLameDuckFlipsReadinessOnly(t *testing.T) {
	t.Parallel()
	s := startOpService(t)
	main := strings.TrimSuffix(s.url, "/")
	health := "http://" + s.health
	if s.readyz(main) != 200 || s.readyz(health) != 200 {
		t.Fatal("not ready at start")
	}
	var ld api.LameDuckResult
	s.op(api.OpLameDuck, nil, &ld)
	if ld.Ready {
		t.Fatalf("lame duck: %+v", ld)
	}
	if s.readyz(main) != 503 || s.readyz(health) != 503 {
		t.Fatal("/readyz still ready in lame duck")
	}
	if probe(t, http.DefaultClient, health+"/healthz") != 200 {
		t.Fatal("/healthz changed with lame duck")
	}
	// Work is still accepted and done.
	id := s.send("still working")
	s.waitState(id, "completed")
	out, err := agentdCommand(t, "ctl", "lameduck", "--ready", "--to", s.url, "--token-file", s.tokenFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ready: true") {
		t.Fatalf("ctl lameduck --ready: %v\n%s", err, out)
	}
	if s.readyz(main) != 200 || s.readyz(health) != 200 {
		t.Fatal("not ready again")
	}
}

func TestOperatorPauseHoldsSpawnsResumeReleases(t *testing.T) {
	t.Parallel()
	s := startOpService(t)
	var pr api.PauseResult
	s.op(api.OpPause, nil, &pr)
	if !pr.Paused {
		t.Fatalf("pause: %+v", pr)
	}
	ids := []string{s.send("held one"), s.send("held two")}
	testkit.WaitFor(t, 10*time.Second, "both spawns held", func() bool {
		tr := s.tree()
		held := 0
		for _, n := range tr.Nodes {
			if n.Status == api.NodeHeld && n.PID == 0 {
				held++
			}
		}
		return tr.Paused && held == 2
	})
	// A held node is in the tree before the executor's working status is
	// written: the status follows.
	for _, id := range ids {
		testkit.WaitFor(t, 10*time.Second, "held task "+id+" working", func() bool { return s.state(id) == "working" })
	}
	if got := len(testkit.Children(s.cmd.Process.Pid)); got != 0 {
		t.Fatalf("%d children forked while paused", got)
	}
	s.op(api.OpResume, nil, &pr)
	if pr.Paused || pr.Affected != 2 {
		t.Fatalf("resume: %+v", pr)
	}
	for _, id := range ids {
		s.waitState(id, "completed")
	}
	// A task completes at its root's result; the node leaves the tree at its
	// reap, which follows.
	testkit.WaitFor(t, 10*time.Second, "every node gone", func() bool { return len(s.tree().Nodes) == 0 })
}

func TestOperatorDrainRefusesNewWorkAndExits(t *testing.T) {
	t.Parallel()
	// A long drain grace gives a window in which the drain is under way.
	s := startOpService(t, "--intelligence", "builtin:wait", "--drain-grace", "3s")
	id := s.send("in flight")
	n := s.waitRunning(id)
	// Stopped, the child cannot answer ctrl/cancel: the ladder has to wait out
	// the grace before SIGTERM and SIGKILL, and the drain stays under way.
	if err := syscall.Kill(n.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(n.PID, syscall.SIGCONT) })
	// A group stop completes asynchronously: on a loaded machine a thread
	// woken by the ctrl/cancel could read it before every thread stopped.
	testkit.WaitFor(t, 10*time.Second, "the child stopped", func() bool { return testkit.Stopped(n.PID) })
	var d api.DrainResult
	s.op(api.OpDrain, map[string]any{"deadline_ms": 20000}, &d)
	if !d.Draining || d.InFlight != 1 || d.DrainTimeoutMS != 20000 || d.ETAMS <= 0 || time.Since(d.StartedAt) > time.Minute {
		t.Fatalf("drain: %+v", d)
	}
	r, err := callRPC(t, http.DefaultClient, s.url, "message/send", sendParams("too late", true), peerAuth)
	if err != nil {
		t.Fatal(err)
	}
	if r.Error == nil || r.Error.Code != -32000 || !strings.Contains(r.Error.Message, "draining") {
		t.Fatalf("a message during the drain: status %d, %+v", r.status, r.Error)
	}
	if code := s.readyz("http://" + s.health); code != 503 {
		t.Fatalf("readyz %d while draining", code)
	}
	var again api.DrainResult
	s.op(api.OpDrain, nil, &again)
	if !again.StartedAt.Equal(d.StartedAt) || again.DrainTimeoutMS != 20000 {
		t.Fatalf("a second a2a.Drain changed the drain: %+v", again)
	}
	if code := s.exitCode(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after the drain, want 0", code)
	}
	if !testkit.GroupDead(n.PID) {
		t.Fatal("the stopped child outlived the drain")
	}
	if !strings.Contains(s.logs.String(), "kill ladder: SIGKILL") {
		t.Error("the drain did not escalate to SIGKILL for the stopped child")
	}
}

// TestOperatorAuditTrail: `agentd serve` keeps each operator action in its
// task store's audit trail (the default store, SQLite), and `agentd ctl
// a2a.Audit` pages through it, newest first, filtered by method and caller
// (issue 34.4); reads are in it too, a peer's refused call is not.
func TestOperatorAuditTrail(t *testing.T) {
	t.Parallel()
	s := startOpService(t)
	ctl := func(args ...string) string {
		t.Helper()
		out, err := agentdCommand(t, append(append([]string{"ctl"}, args...), "--to", s.url, "--token-file", s.tokenFile)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	ctl("a2a.Tree")
	ctl("a2a.LameDuck")
	ctl("a2a.LameDuck", "--ready")
	ctl("a2a.Cancel", "--handle", "no-such-task", "--reason", "audit test")
	if r, err := callRPC(t, http.DefaultClient, s.url, api.OpPause, nil, peerAuth); err != nil || r.Error == nil || r.Error.Code != -32601 {
		t.Fatalf("a peer's a2a.Pause: %v %+v", err, r.Error)
	}
	page := ctl("a2a.Audit", "--limit", "2")
	lines := strings.Split(strings.TrimSpace(page), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "  token:admin  a2a.Cancel  target no-such-task  ok  ") ||
		!strings.Contains(lines[1], "  token:admin  a2a.LameDuck  ok  {\"ready\":true}") || !strings.HasPrefix(lines[2], "next: --before ") {
		t.Fatalf("the first page:\n%s", page)
	}
	rest := ctl("a2a.Audit", "--before", strings.TrimPrefix(lines[2], "next: --before "))
	if lines := strings.Split(strings.TrimSpace(rest), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "  token:admin  a2a.LameDuck  ok  {\"ready\":false}  on ") ||
		!strings.Contains(lines[1], "  token:admin  a2a.Tree  ok  ") {
		t.Fatalf("the second page:\n%s", rest)
	}
	if got := ctl("a2a.Audit", "--method", "a2a.Cancel", "--caller", "token:admin"); strings.Count(got, "\n") != 1 || !strings.Contains(got, "a2a.Cancel") {
		t.Fatalf("filtered:\n%s", got)
	}
	if got := ctl("a2a.Audit", "--caller", "' OR 1=1 --"); strings.TrimSpace(got) != "no audit records" {
		t.Fatalf("a hostile caller filter:\n%s", got)
	}
}
