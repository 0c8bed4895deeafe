package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/internal/testkit"
)

// The reference MCP server, @modelcontextprotocol/server-everything, pinned in
// cmd/agentd/e2e/mcp/package.json and installed by `make e2e-mcp-deps` (npm ci). These
// tests need node and the package: when either is missing they fail, loudly,
// with what to run.
const everythingMain = "mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

// everything is one running reference server.
type everything struct {
	url  string
	cmd  *exec.Cmd
	logs *testkit.Buffer
}

// startEverything starts the reference server over streamable HTTP on
// 127.0.0.1 (mcp/loopback.cjs pins its listener to loopback and reports the
// port). port 0 picks a free one. It is killed and reaped at cleanup.
func startEverything(t *testing.T, port int) *everything {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: the MCP e2e tests need Node.js (apt-get install nodejs npm) and `make e2e-mcp-deps`: %v", err)
	}
	if _, err := os.Stat(everythingMain); err != nil {
		t.Fatalf("@modelcontextprotocol/server-everything is not installed: run `make e2e-mcp-deps` (npm ci in e2e/mcp): %v", err)
	}
	cmd := exec.Command(node, "--require", "./mcp/loopback.cjs", everythingMain, "streamableHttp")
	// A padded environment makes its get-env tool answer more than the
	// result cap the tests set.
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "AGENTD_E2E_PAD="+strings.Repeat("x", 5000))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Its stderr is read from a pipe of our own: a StderrPipe must not be
	// read while Wait runs, which closes it.
	stderr, stderrW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	e := &everything{cmd: cmd, logs: &testkit.Buffer{}}
	cmd.Stdout, cmd.Stderr = e.logs, stderrW
	err = cmd.Start()
	stderrW.Close()
	if err != nil {
		stderr.Close()
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	go func() {
		defer stderr.Close()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			e.logs.Write([]byte(line + "\n"))
			if f := strings.Fields(line); len(f) == 3 && f[0] == "AGENTD_E2E_LISTENING" {
				select {
				case listening <- net.JoinHostPort(f[1], f[2]):
				default:
				}
			}
		}
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		if t.Failed() {
			t.Logf("server-everything log:\n%s", e.logs.String())
		}
	})
	select {
	case addr := <-listening:
		e.url = "http://" + addr + "/mcp"
	case err := <-waited:
		waited <- err
		t.Fatalf("server-everything exited before listening: %v\n%s", err, e.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("server-everything did not listen within 30s\n%s", e.logs.String())
	}
	return e
}

// observedIn returns the tool results the scripted models saw, from agentd's
// log (their text is there with --log-content only).
func observedIn(log string) []map[string]any {
	return testkit.WithMsg(testkit.JSONLines(log), "script observed")
}

// A scripted model calls the reference server's tools through agentd: echo
// and get-sum answer; get-env answers more than --mcp-max-result and is cut
// with a note; get-tiny-image is outside the --mcp-tools root grant and is
// refused; a child spawned with only echo gets echo and is refused get-sum.
func TestMCPEverythingThroughAgentd(t *testing.T) {
	t.Parallel()
	ev := startEverything(t, 0)
	script := writeScript(t, `[depth 0]
call everything/echo {"message":"hello from agentd"}
call everything/get-sum {"a":2,"b":40}
call everything/get-env
call everything/get-tiny-image
spawn sync "narrow" scope=everything/echo
answer "root done"

[depth 1]
call everything/echo {"message":"from the child"}
call everything/get-sum {"a":1,"b":1}
answer "child done"
`)
	// --log-content: the results are read from what the scripts log.
	cmd := agentdCommand(t, "run", "--log-content", "--mcp", "everything="+ev.url,
		"--mcp-tools", "everything=echo,get-sum,get-env", "--mcp-tags", "everything=none",
		"--mcp-max-result", "2048", "--intelligence", "builtin:script="+script, "--instruction", "use the tools")
	var stdout, stderr testkit.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "root done" {
		t.Fatalf("stdout = %q", got)
	}
	type want struct {
		path, tool string
		isErr      bool
		text       string
	}
	for _, w := range []want{
		{"0", "everything/echo", false, "Echo: hello from agentd"},
		{"0", "everything/get-sum", false, "The sum of 2 and 40 is 42."},
		{"0", "everything/get-env", false, "[agentd: result truncated: "},
		{"0", "everything/get-tiny-image", true, `tool "everything/get-tiny-image" is not in this subagent's scope`},
		{"0.1", "everything/echo", false, "Echo: from the child"},
		{"0.1", "everything/get-sum", true, `tool "everything/get-sum" is not in this subagent's scope`},
	} {
		found := false
		for _, o := range observedIn(stderr.String()) {
			if str(o, "agent_path") == w.path && str(o, "tool") == w.tool {
				found = true
				if o["is_error"] != w.isErr || !strings.Contains(str(o, "text"), w.text) {
					t.Errorf("%s %s: is_error %v, text %q; want is_error %v with %q", w.path, w.tool, o["is_error"], str(o, "text"), w.isErr, w.text)
				}
			}
		}
		if !found {
			t.Errorf("%s never saw a result of %s", w.path, w.tool)
		}
	}
	if env := ev.logs.String(); strings.Count(env, "Received MCP POST request") == 0 {
		t.Errorf("the server saw no request")
	}
	for _, pid := range childPIDs(testkit.JSONLines(stderr.String())) {
		if testkit.Alive(pid) {
			t.Errorf("subagent process %d outlived the run", pid)
		}
	}
}

// --mcp-tools naming a tool the server does not list is bad config (exit 2).
func TestMCPUnknownGrantedToolExits2(t *testing.T) {
	t.Parallel()
	ev := startEverything(t, 0)
	out, err := agentdCommand(t, "run", "--mcp", "everything="+ev.url, "--mcp-tags", "everything=none",
		"--mcp-tools", "everything=echo,no-such-tool", "--instruction", "x").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--mcp-tools: everything/no-such-tool") {
		t.Fatalf("exit = %v, want 2 naming --mcp-tools and the tool\n%s", err, out)
	}
}

// A required MCP server that cannot be reached stops a one-shot run with exit
// 6, naming it; marked optional, the run goes on without its tools.
func TestMCPUnreachableExits6(t *testing.T) {
	t.Parallel()
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", freePort(t))
	cmd := agentdCommand(t, "run", "--mcp", "down="+url, "--mcp-connect-timeout", "500ms", "--instruction", "one two")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 6 {
		t.Fatalf("exit = %v, want 6\n%s", err, out)
	}
	if !strings.Contains(string(out), "required server unavailable: down: ") {
		t.Fatalf("the message does not name the server:\n%s", out)
	}
	cmd = agentdCommand(t, "run", "--mcp", "down="+url, "--mcp-optional", "down", "--mcp-connect-timeout", "500ms", "--instruction", "one two")
	out, err = cmd.Output()
	if err != nil || !strings.Contains(string(out), "2 words") {
		t.Fatalf("optional server down: %v\n%s", err, out)
	}
}

// agentd serve starts while its MCP server is down: not ready, and it keeps
// reconnecting; once the server is up it is ready, and a task's tool call
// goes through.
func TestMCPServeWaitsForItsServer(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	script := writeScript(t, "[default]\ncall everything/echo {\"message\":\"served\"}\nanswer \"{transcript}\"\n")
	s := startService(t, "--mcp", fmt.Sprintf("everything=http://127.0.0.1:%d/mcp", port), "--intelligence", "builtin:script="+script)
	ready := func() int {
		resp, err := http.Get(s.url + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testkit.WaitFor(t, 20*time.Second, "a failed connect attempt", func() bool {
		return len(testkit.WithMsg(testkit.JSONLines(s.logs.String()), "mcp server unavailable")) > 0
	})
	if code := ready(); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d with the MCP server down, want 503", code)
	}
	startEverything(t, port)
	testkit.WaitFor(t, 40*time.Second, "ready once the MCP server is up", func() bool { return ready() == http.StatusOK })
	c := s.client(t)
	res, err := c.SendMessage(context.Background(), textMessage("call the tool"))
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted || !strings.Contains(artifactText(task), "everything/echo: Echo: served") {
		t.Fatalf("task = %+v", res)
	}
}
