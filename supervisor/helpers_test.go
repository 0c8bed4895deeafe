package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
)

// The test binary impersonates subagents: when the supervisor re-execs it with
// AGENT_SUBAGENT set, TestMain runs the helper named in envHelper instead of the
// tests. A helper that no test uses fails a full run.
const envHelper = "SUPERVISOR_TEST_HELPER"

var helpers = map[string]func() int{
	"complete":           helperComplete,
	"cooperative":        helperCooperative,
	"ignore-term":        helperIgnoreTerm,
	"bad-frame":          helperBadFrame,
	"huge-frame":         helperHugeFrame,
	"no-ready":           helperNoReady,
	"crash-before-ready": helperCrashBeforeReady,
	"exit-no-result":     helperExitNoResult,
	"close-stdout":       helperCloseStdout,
	"blob-put":           helperBlobPut,
}

var (
	usedMu sync.Mutex
	used   = map[string]bool{}
)

func TestMain(m *testing.M) {
	if os.Getenv(api.EnvSubagent) != "" {
		h, ok := helpers[os.Getenv(envHelper)]
		if !ok {
			fmt.Fprintf(os.Stderr, "no helper %q\n", os.Getenv(envHelper))
			os.Exit(99)
		}
		os.Exit(h())
	}
	flag.Parse()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && !testing.Short() {
		var unused []string
		for name := range helpers {
			if !used[name] {
				unused = append(unused, name)
			}
		}
		sort.Strings(unused)
		if len(unused) > 0 {
			fmt.Fprintf(os.Stderr, "helpers no test uses: %v\n", unused)
			code = 1
		}
	}
	os.Exit(code)
}

// childIO is a helper's end of the control channel.
type childIO struct {
	w *api.FrameWriter
	r *api.FrameReader
}

func helperIO() *childIO {
	return &childIO{w: api.NewFrameWriter(os.Stdout, 0), r: api.NewFrameReader(os.Stdin, 0)}
}

// start does the child half of the handshake and returns the payload.
func (c *childIO) start() *api.SpawnPayload {
	if err := c.w.Send(api.MethodReady, 0, api.Ready{PID: os.Getpid()}); err != nil {
		os.Exit(90)
	}
	f, err := c.r.Read()
	if err != nil || f.Method != api.MethodSpawn {
		os.Exit(91)
	}
	var p api.SpawnPayload
	if err := api.DecodeParams(f, &p); err != nil {
		os.Exit(92)
	}
	return &p
}

func helperComplete() int {
	c := helperIO()
	p := c.start()
	fmt.Fprintf(os.Stderr, `{"level":"INFO","msg":"helper working","objective_len":%d}`+"\n", len(p.Contract.Objective))
	_ = c.w.Send(api.MethodEvent, 0, api.LoopEvent{Step: 1, Kind: api.EventModel, UsageDelta: api.Usage{TokensIn: 30, TokensOut: 12, Steps: 1}})
	_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("echo: " + p.Contract.Objective), Usage: api.Usage{TokensIn: 1, TokensOut: 1, Steps: 1}})
	return 0
}

// helperCooperative works until ctrl/cancel, then reports cancelled.
func helperCooperative() int {
	c := helperIO()
	c.start()
	for {
		f, err := c.r.Read()
		if err != nil {
			return 1
		}
		if f.Method == api.MethodCancel {
			_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText("stopped")})
			return 0
		}
	}
}

// helperIgnoreTerm ignores ctrl/cancel and SIGTERM: only SIGKILL ends it.
func helperIgnoreTerm() int {
	signal.Ignore(syscall.SIGTERM)
	c := helperIO()
	c.start()
	for {
		if _, err := c.r.Read(); err != nil {
			select {}
		}
	}
}

func helperBadFrame() int {
	c := helperIO()
	c.start()
	os.Stdout.Write([]byte{0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'})
	select {}
}

// helperHugeFrame claims a 100 MiB frame.
func helperHugeFrame() int {
	c := helperIO()
	c.start()
	os.Stdout.Write([]byte{0x06, 0x40, 0, 0, '{'})
	select {}
}

func helperNoReady() int { select {} }

func helperCrashBeforeReady() int { return 3 }

func helperExitNoResult() int {
	c := helperIO()
	c.start()
	return 0
}

// helperCloseStdout closes control-out but stays alive until cancelled.
func helperCloseStdout() int {
	c := helperIO()
	c.start()
	os.Stdout.Close()
	for {
		if _, err := c.r.Read(); err != nil {
			return 0
		}
	}
}

// helperBlobPut stores its objective, repeated 100 times, as a blob and
// returns a reference to it; a refused blob/put becomes the result's detail.
func helperBlobPut() int {
	c := helperIO()
	p := c.start()
	content := strings.Repeat(p.Contract.Objective, 100)
	if err := c.w.Send(api.MethodBlobPut, 1, api.BlobPut{MediaType: "text/plain", Content: content}); err != nil {
		return 93
	}
	for {
		f, err := c.r.Read()
		if err != nil {
			return 94
		}
		if !f.IsResponse() || f.ID != 1 {
			continue
		}
		res := api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("")}
		var ref api.BlobRef
		if f.Error != nil {
			res.Detail = f.Error.Message
		} else if err := json.Unmarshal(f.Result, &ref); err != nil {
			return 95
		} else {
			res.Distillate = api.ResultBody{Reference: &api.Reference{URI: ref.URI, Summary: "summary"}}
		}
		_ = c.w.Send(api.MethodResult, 0, res)
		return 0
	}
}

// --- test-side helpers ---

// logBuffer collects the supervisor's JSON log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fastConfig returns a config whose ladder runs in milliseconds.
func fastConfig(logw io.Writer) Config {
	return Config{
		Logger:     slog.New(slog.NewJSONHandler(logw, nil)),
		SpawnReady: 5 * time.Second,
		DrainGrace: 150 * time.Millisecond,
		KillGrace:  150 * time.Millisecond,
		ReapGrace:  2 * time.Second,
	}
}

// newSupervisor returns a supervisor whose children run the named helper.
func newSupervisor(t *testing.T, helper string, mutate ...func(*Config)) (*Supervisor, *logBuffer) {
	t.Helper()
	usedMu.Lock()
	used[helper] = true
	usedMu.Unlock()
	logs := &logBuffer{}
	cfg := fastConfig(logs)
	cfg.Env = []string{envHelper + "=" + helper}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s, logs
}

func testPayload(objective string, deadline time.Duration) api.SpawnPayload {
	return api.SpawnPayload{
		Contract:     api.OutputContract{Objective: objective},
		Limits:       api.Limits{MaxSteps: 5, MaxTokens: 10000, Deadline: api.Duration(deadline), MaxChildren: 8},
		Telemetry:    api.Telemetry{RunID: "run-test"},
		Intelligence: api.Intelligence{Endpoint: "builtin:demo"},
	}
}

// start launches a tree and registers a cleanup that checks the child's
// process group is gone.
func start(t *testing.T, s *Supervisor, p api.SpawnPayload) *Run {
	t.Helper()
	r, err := s.Start(context.Background(), StartRequest{Payload: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		<-r.Done()
		if pid := r.Info().PID; pid > 0 {
			waitGroupGone(t, pid)
		}
	})
	return r
}

// waitGroupGone polls until the process group led by pid has no members.
func waitGroupGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unix.Kill(-pid, 0)
		if errors.Is(err, unix.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("process group %d still exists: kill(-pgid, 0) = %v", pid, err)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitPID polls until the run's child is running its payload, and returns its pid.
func waitPID(t *testing.T, r *Run) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if in := r.Info(); in.State == StateRunning {
			return in.PID
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("child never started")
	return 0
}

func result(t *testing.T, r *Run, within time.Duration) api.SubagentResult {
	t.Helper()
	select {
	case <-r.Done():
		return r.Result()
	case <-time.After(within):
		t.Fatalf("run did not end within %s", within)
		return api.SubagentResult{}
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
