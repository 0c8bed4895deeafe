package supervisor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// A root logs at the service's level (Config.LogLevel), or a quieter one its
// payload asks for, never a more verbose one; whether content may be logged
// is the operator's alone (Config.LogContent), whatever the payload says.
// Children inherit both.
func TestRootLogSettings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		service   slog.Level
		content   bool
		asked     string
		askedBody bool
		want      string
	}{
		{"default", slog.LevelInfo, false, "", false, "info"},
		{"service level", slog.LevelWarn, true, "", false, "warn"},
		{"louder than the service", slog.LevelWarn, false, "debug", true, "warn"},
		{"quieter than the service", slog.LevelInfo, true, "error", false, "error"},
		{"not a level", slog.LevelDebug, false, "chatty", false, "debug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newNestingSupervisor(t, func(c *Config) { c.LogLevel, c.LogContent = tc.service, tc.content })
			_, res := runProg(t, s, prog{Calls: []progCall{spawnCall(prog{}, api.DispositionSync)}},
				func(p *api.SpawnPayload) { p.Telemetry.LogLevel, p.Telemetry.LogContent = tc.asked, tc.askedBody })
			rep := report(t, res)
			child := report(t, api.SubagentResult{Distillate: *childReportOf(t, rep.Results[0]).Distillate})
			for who, tel := range map[string]api.Telemetry{"root": rep.Telemetry, "child": child.Telemetry} {
				if tel.LogLevel != tc.want || tel.LogContent != tc.content {
					t.Errorf("%s: log_level %q, log_content %v; want %q, %v", who, tel.LogLevel, tel.LogContent, tc.want, tc.content)
				}
			}
		})
	}
}

// Aggregated (the default), a child's stderr lines reach the supervisor's
// log, tagged with its run_id and agent_path; with Config.ChildStderr the
// child writes them there itself and the supervisor's log has none.
func TestChildStderr(t *testing.T) {
	t.Run("aggregated", func(t *testing.T) {
		s, logs := newSupervisor(t, "complete")
		result(t, start(t, s, testPayload("x", time.Minute)), 10*time.Second)
		testkit.WaitFor(t, 10*time.Second, "the forwarded line", func() bool { return strings.Contains(logs.String(), `"msg":"helper working"`) })
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "helper working") && (!strings.Contains(line, `"child":true`) || !strings.Contains(line, `"run_id":"run-test"`)) {
				t.Errorf("forwarded line %s", line)
			}
		}
	})
	t.Run("direct", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "children.log")
		f, err := os.Create(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		s, logs := newSupervisor(t, "complete", func(c *Config) { c.ChildStderr = f })
		if res := result(t, start(t, s, testPayload("x", time.Minute)), 10*time.Second); res.Status != api.StatusCompleted {
			t.Fatalf("result %+v", res)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"msg":"helper working","objective_len":1}`) {
			t.Errorf("the child's own stderr: %q", b)
		}
		if strings.Contains(logs.String(), "helper working") {
			t.Errorf("the supervisor forwarded a line the child wrote itself:\n%s", logs.String())
		}
	})
}

// TestForwardLogsLines: the stderr forwarding cuts lines across reads of its
// shared buffers: a JSON line keeps its fields, a text line is logged as
// text, a line longer than a read arrives whole, one over maxLogLine is cut
// there, and a last line with no newline is forwarded at EOF.
func TestForwardLogsLines(t *testing.T) {
	ours, theirs, err := childPipe(true, "stderr")
	if err != nil {
		t.Fatal(err)
	}
	w := os.NewFile(uintptr(theirs), "child stderr")
	long := strings.Repeat("a", 10000)
	huge := strings.Repeat("b", maxLogLine+100)
	go func() {
		defer w.Close()
		for _, s := range []string{`{"level":"WARN","msg":"json line","k":1}` + "\n", "plain text\n", long[:3000], long[3000:] + "\n\n", huge + "\n", "tail"} {
			if _, err := w.WriteString(s); err != nil {
				return
			}
		}
	}()
	var buf bytes.Buffer
	var lp atomic.Pointer[slog.Logger]
	lp.Store(slog.New(slog.NewJSONHandler(&buf, nil)))
	forwardLogs(ours, &lp) // returns at EOF
	var got []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		got = append(got, rec)
	}
	if len(got) != 5 {
		t.Fatalf("%d records, want 5", len(got))
	}
	if got[0]["msg"] != "json line" || got[0]["level"] != "WARN" || got[0]["k"] != 1.0 || got[0]["child"] != true {
		t.Errorf("JSON line: %v", got[0])
	}
	for i, want := range []string{"plain text", long, huge[:maxLogLine], "tail"} {
		if rec := got[i+1]; rec["msg"] != "child stderr" || rec["line"] != want {
			t.Errorf("line %d: %q (%d bytes), want %d bytes", i+1, rec["msg"], len(fmt.Sprint(rec["line"])), len(want))
		}
	}
}

// TestLogPollerOneGoroutine: the stderr of many children is forwarded by
// one goroutine, which ends once every pipe has reached EOF (issue 35: a
// goroutine and its stack a child were the supervisor's memory per live
// child); each stream's lines reach its own logger, and each stream's end
// is told once.
func TestLogPollerOneGoroutine(t *testing.T) {
	const n = 8
	base := runtime.NumGoroutine()
	var bufs [n]testkit.Buffer
	var logs [n]atomic.Pointer[slog.Logger]
	var writers [n]*os.File
	var ended atomic.Int32
	for i := range n {
		r, w, err := logPipe()
		if err != nil {
			t.Fatal(err)
		}
		writers[i] = os.NewFile(uintptr(w), "child stderr")
		logs[i].Store(slog.New(slog.NewJSONHandler(&bufs[i], nil)))
		if err := forwardStderr(r, &logs[i], func() { ended.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if got := runtime.NumGoroutine() - base; got > 1 {
		t.Fatalf("%d goroutines forward %d pipes, want 1", got, n)
	}
	for i, w := range writers {
		if _, err := fmt.Fprintf(w, "line of %d\n", i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		testkit.WaitFor(t, 5*time.Second, "a stream's line", func() bool { return strings.Contains(bufs[i].String(), fmt.Sprintf(`"line":"line of %d"`, i)) })
	}
	for _, w := range writers {
		w.Close()
	}
	testkit.WaitFor(t, 5*time.Second, "every stream ended", func() bool { return ended.Load() == n })
	testkit.WaitFor(t, 5*time.Second, "the poller's goroutine gone", func() bool { return runtime.NumGoroutine() <= base })
	if got := ended.Load(); got != n {
		t.Fatalf("%d ends told for %d streams", got, n)
	}
}

// TestPollerParksInTheRuntime: a poller's goroutine waits in the runtime's
// poller (IO wait), not in a blocking epoll_wait, which held a thread and
// its P until the runtime took the P back (up to 10 ms on a quiet process):
// a root's 1 ms spawn-ready deadline fired after its ctrl/ready had come
// (TestBreakerOpensOnRootCrashingAtStart, cmd/agentd/e2e).
func TestPollerParksInTheRuntime(t *testing.T) {
	r, w, err := logPipe()
	if err != nil {
		t.Fatal(err)
	}
	var lp atomic.Pointer[slog.Logger]
	lp.Store(slog.New(slog.DiscardHandler))
	ended := make(chan struct{})
	if err := forwardStderr(r, &lp, func() { close(ended) }); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "supervisor.(*poller).run(") {
				header, _, _ := strings.Cut(g, "\n")
				return header
			}
		}
		return ""
	}
	testkit.WaitFor(t, 5*time.Second, "the poller waiting", func() bool {
		return state() != "" && !strings.Contains(state(), "[running") && !strings.Contains(state(), "[runnable")
	})
	if s := state(); !strings.Contains(s, "[IO wait") {
		t.Errorf("the poller's goroutine: %s, want it in IO wait", s)
	}
	unix.Close(w)
	<-ended
}
