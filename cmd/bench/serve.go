package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/tlsconfig"
)

// serveProc is a running `agentd serve`. The figures that use it host no
// supervisor, so os/exec may wait for it.
type serveProc struct {
	cmd     *exec.Cmd
	url     string
	started atomic.Int64 // forwarded "subagent started" lines: children past their payload
	logDone chan struct{}
	state   string // the state directory of its own that stop removes, or ""
}

// tlsArgs are serve's flags for the certificates mintCerts wrote into dir.
func tlsArgs(dir string) []string {
	return []string{
		"--tls-cert", filepath.Join(dir, tlsconfig.DevServerCert),
		"--tls-key", filepath.Join(dir, tlsconfig.DevServerKey),
		"--tls-bundle", filepath.Join(dir, tlsconfig.DevBundle),
		"--allow-trust-domain", benchTD.String(),
	}
}

// operatorArgs lets the operator SVID mintCerts writes call the a2a.*
// methods (poolReady reads a2a.Tree).
func operatorArgs() []string {
	return []string{"--operator", spiffeid.RequireFromPath(benchTD, "/operator").String()}
}

// poolReady reports whether the service's warm pool holds size children
// ready for a payload (a2a.Tree over op, the operator's client), and no
// child is starting.
func poolReady(ctx context.Context, op *http.Client, url string, size int) (bool, error) {
	b, status, err := post(ctx, op, url, []byte(`{"jsonrpc":"2.0","id":1,"method":"a2a.Tree"}`))
	if err != nil {
		return false, err
	}
	var r struct {
		Result api.TreeResult `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Error != nil || status != http.StatusOK {
		return false, fmt.Errorf("a2a.Tree: HTTP %d: %.200s", status, b)
	}
	wp := r.Result.WarmPool
	if size == 0 {
		return wp == nil, nil
	}
	return wp != nil && wp.Idle == size && wp.Starting == 0, nil
}

// startServe runs `agentd serve` on a loopback port with args and waits until
// it listens. Its log is read (and counted) to the end; lines at warn or above
// go to logw.
func startServe(ctx context.Context, agentd string, args []string, logw io.Writer) (*serveProc, error) {
	all := append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)
	// Each serve gets a state directory of its own unless args choose the
	// store: the per-user default would carry tasks (and their messageIds,
	// which make a repeated send return the old task) from one run to the next.
	state := ""
	if !slices.Contains(args, "--store") && !slices.Contains(args, "--state-dir") {
		dir, err := os.MkdirTemp("", "agentd-bench-state-")
		if err != nil {
			return nil, err
		}
		state = dir
		all = append(all, "--state-dir", dir)
	}
	cmd := exec.CommandContext(ctx, agentd, all...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(state)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(state)
		return nil, err
	}
	s := &serveProc{cmd: cmd, logDone: make(chan struct{}), state: state}
	listening := make(chan string, 1)
	go func() {
		defer close(s.logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec struct {
				Level  string `json:"level"`
				Msg    string `json:"msg"`
				Listen string `json:"listen"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				fmt.Fprintf(logw, "agentd: %s\n", sc.Bytes())
				continue
			}
			switch {
			case rec.Msg == "serving":
				listening <- rec.Listen
			case rec.Msg == "subagent started":
				s.started.Add(1)
			case rec.Level == "WARN" || rec.Level == "ERROR":
				fmt.Fprintf(logw, "agentd: %s\n", sc.Bytes())
			}
		}
	}()
	select {
	case addr := <-listening:
		scheme := "http://"
		for _, a := range args {
			if a == "--tls-cert" {
				scheme = "https://"
			}
		}
		s.url = scheme + addr + "/"
		return s, nil
	case <-s.logDone:
		err := cmd.Wait()
		os.RemoveAll(state)
		return nil, fmt.Errorf("agentd serve exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(state)
		return nil, fmt.Errorf("agentd serve did not listen within 30s")
	}
}

// pid is the service's process id.
func (s *serveProc) pid() int { return s.cmd.Process.Pid }

// children counts the service's child processes (alive or not yet reaped).
func (s *serveProc) children() int { return len(testkit.Children(s.pid())) }

// stop drains the service with SIGTERM and waits for it (SIGKILL after 30s).
func (s *serveProc) stop() error {
	if s.state != "" {
		defer os.RemoveAll(s.state)
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { <-s.logDone; done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		return fmt.Errorf("agentd serve did not drain within 30s: %v", <-done)
	}
}

// procKiB reads a "Name:   N kB" field of /proc/pid/status or
// /proc/pid/smaps_rollup, in bytes.
func procBytes(pid int, file, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != field {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, err
		}
		return n * 1024, nil
	}
	return 0, fmt.Errorf("/proc/%d/%s: no %s", pid, file, field)
}

func rss(pid int) (float64, error) { return procBytes(pid, "status", "VmRSS") }
func pss(pid int) (float64, error) { return procBytes(pid, "smaps_rollup", "Pss") }

// rssAnon is a process's anonymous resident memory (RssAnon): its RSS
// without the pages of files it maps, such as its binary's.
func rssAnon(pid int) (float64, error) { return procBytes(pid, "status", "RssAnon") }
