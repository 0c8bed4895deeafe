// Package e2e runs the real agentd binary: built once in TestMain, started as a
// process per test, driven over real sockets with a2a-go's client.
//
// Every test runs in parallel with the others (t.Parallel, as its first
// statement: its services have their own state directories and ports, its
// PostgreSQL its own server) except those that change the test process itself:
// TestOneTraceAcrossTreeAndMesh (t.Setenv) and TestUncleanDrainExits143 (a
// subreaper), which run alone before the parallel ones start, and TestSPIRE,
// which make test-spire runs alone.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/agentd/agentd/internal/testkit"
)

var agentdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentdBin = filepath.Join(dir, "agentd")
	// Every agentd the tests start has a per-user state directory of its
	// own here, never the user's (startService also gives each service a
	// --state-dir of its own).
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	// The build tags of the Makefile's GO_TAGS and the image, and their
	// GOEXPERIMENT unless the caller chose one: the tests run the binary
	// that ships.
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", agentdBin, "..")
	if os.Getenv("GOEXPERIMENT") == "" {
		build.Env = append(os.Environ(), "GOEXPERIMENT=nogreenteagc")
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build agentd:", err)
		os.Exit(1)
	}
	code := testkit.LeakCheck(m.Run())
	os.RemoveAll(dir)
	os.Exit(code)
}

// service is one running `agentd serve`.
type service struct {
	cmd    *exec.Cmd
	url    string // from the "serving" log line, without its trailing slash: https:// when TLS is on
	health string // the probe listener's address, when --health-listen is set
	logs   *testkit.Buffer
	waited chan struct{}
	err    error // the process's exit, once waited is closed
}

// fastFlags make the kill ladder run in milliseconds. The warm pool is off, so
// a service's children are its subagents (pool_test.go turns it on).
var fastFlags = []string{"--drain-grace", "200ms", "--kill-grace", "200ms", "--warm-pool", "0"}

// startService runs agentd serve on a free loopback port with fastFlags and
// args, and waits until it serves. The process is killed and reaped at
// cleanup, and none of its children may outlive it.
func startService(t *testing.T, args ...string) *service {
	t.Helper()
	return startServiceAs(t, agentdBin, nil, args...)
}

// startServiceAs is startService running bin (a copy of agentd) with env
// added to the environment.
func startServiceAs(t *testing.T, bin string, env []string, args ...string) *service {
	t.Helper()
	// A state directory of its own (a test's --state-dir, later, wins).
	all := append([]string{"serve", "--listen", "127.0.0.1:0", "--state-dir", t.TempDir()}, fastFlags...)
	all = append(all, args...)
	cmd := exec.Command(bin, all...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	// A test binary that dies without its cleanups (a -timeout panic) takes
	// the service with it: SIGTERM, so it drains and reaps its children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	// The log is read from a pipe of our own, not StderrPipe: Wait closes a
	// StderrPipe as soon as the process exits, which can drop its last lines.
	stderr, stderrW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = stderrW
	s := &service{cmd: cmd, logs: &testkit.Buffer{}, waited: make(chan struct{})}
	err = cmd.Start()
	stderrW.Close()
	if err != nil {
		stderr.Close()
		t.Fatal(err)
	}
	type addrs struct{ url, health string }
	serving := make(chan addrs, 1)
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		defer stderr.Close()
		var health string
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.logs.Write([]byte(line + "\n"))
			var rec struct {
				Msg    string `json:"msg"`
				Listen string `json:"listen"`
				URL    string `json:"url"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch rec.Msg {
			case "health listening": // logged before "serving"
				health = rec.Listen
			case "serving":
				select {
				case serving <- addrs{strings.TrimSuffix(rec.URL, "/"), health}:
				default:
				}
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		// Every line the service wrote is in s.logs before waited closes (the
		// bound only matters if something else inherited its stderr).
		select {
		case <-logsDone:
		case <-time.After(5 * time.Second):
		}
		s.err = err
		close(s.waited)
	}()
	t.Cleanup(func() {
		kids := testkit.Children(cmd.Process.Pid)
		cmd.Process.Kill()
		<-s.waited
		if t.Failed() {
			t.Logf("agentd log:\n%s", s.logs.String())
		}
		// The service's children die with it (PDEATHSIG): none is left behind.
		testkit.WaitFor(t, 10*time.Second, "the service's children gone", func() bool {
			for _, k := range kids {
				if testkit.Alive(k) {
					return false
				}
			}
			return true
		})
	})
	select {
	case a := <-serving:
		s.url, s.health = a.url, a.health
	case <-s.waited:
		t.Fatalf("agentd exited before serving: %v\n%s", s.err, s.logs.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("agentd did not serve within 20s\n%s", s.logs.String())
	}
	return s
}

// exitCode waits for the service to exit by itself and returns its code.
func (s *service) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-s.waited:
	case <-time.After(within):
		t.Fatalf("agentd still running after %s", within)
	}
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		return ee.ExitCode()
	}
	if s.err != nil {
		t.Fatalf("wait: %v", s.err)
	}
	return 0
}

// stop sends SIGTERM (a drain, which also flushes the service's spans) and
// waits for the exit.
func (s *service) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.waited:
	case <-time.After(30 * time.Second):
		t.Fatalf("agentd did not exit within 30s of SIGTERM\n%s", s.logs.String())
	}
}

// agentdCommand is exec.Command for the agentd binary, bounded: the process is
// killed (its children die with it) two minutes after the call or when the
// test ends, so a run that hangs fails its test instead of outliving it.
func agentdCommand(t *testing.T, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return exec.CommandContext(ctx, agentdBin, args...)
}

// runCombined runs agentd with args to its exit (within 30s) and returns its
// output and exit code.
func runCombined(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return runCombinedEnv(t, nil, args...)
}

// runCombinedEnv is runCombined with env added to the environment.
func runCombinedEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentdBin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("run agentd %v: %v", args, err)
	return "", -1
}

// wantUsageError runs agentd with args (and env, a KEY=VALUE, added to the
// environment when not empty) and checks that it exits 2 with a message
// naming the setting.
func wantUsageError(t *testing.T, env, setting string, args ...string) {
	t.Helper()
	var extra []string
	if env != "" {
		extra = []string{env}
	}
	out, code := runCombinedEnv(t, extra, args...)
	if code != 2 || !strings.Contains(out, setting) {
		t.Errorf("agentd %v %s: exit %d, output %q; want exit 2 naming %s", args, env, code, out, setting)
	}
}

// client returns an a2a-go client for the service, built from its agent card.
func (s *service) client(t *testing.T) *a2aclient.Client {
	t.Helper()
	ctx := context.Background()
	card, err := agentcard.NewResolver(http.DefaultClient).Resolve(ctx, s.url)
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(&http.Client{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

func textMessage(text string) *a2a.MessageSendParams {
	return &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})}
}

func nonBlocking(p *a2a.MessageSendParams) *a2a.MessageSendParams {
	f := false
	p.Config = &a2a.MessageSendConfig{Blocking: &f}
	return p
}

func artifactText(t *a2a.Task) string {
	var out []string
	for _, art := range t.Artifacts {
		for _, p := range art.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				out = append(out, tp.Text)
			}
		}
	}
	return strings.Join(out, "\n")
}

func readAll(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}
