package supervisor

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

// The test binary impersonates subagents: when the supervisor re-execs it with
// AGENT_SUBAGENT set, TestMain runs the helper named in envHelper instead of the
// tests. A helper that no test uses fails a full run.
const envHelper = "SUPERVISOR_TEST_HELPER"

var helpers = map[string]func() int{
	"complete":           helperComplete,
	"gcenv":              helperGCEnv,
	"cooperative":        helperCooperative,
	"ignore-term":        helperIgnoreTerm,
	"bad-frame":          helperBadFrame,
	"huge-frame":         helperHugeFrame,
	"no-ready":           helperNoReady,
	"crash-before-ready": helperCrashBeforeReady,
	"exit-no-result":     helperExitNoResult,
	"close-stdout":       helperCloseStdout,
	"responsive":         helperResponsive,
	"busy":               helperBusy,
	"slow-tool":          helperSlowTool,
	"close-then-exit":    helperCloseThenExit,
	"fork-grandchild":    helperForkGrandchild,
	"grandchild":         helperGrandchild,
	"traced":             helperTraced,
	"result-then-hang":   helperResultThenHang,
	"tracer":             helperTracer,
	"blob-put":           helperBlobPut,
	"flaky-start":        helperFlakyStart,
	"slow-reader":        helperSlowReader,
	"no-read":            helperNoRead,
	"streams":            helperStreams,
	"grow":               helperGrow,
	"rehearser":          helperRehearser,
}

// Settings the helpers read from their environment (set through Config.Env).
const (
	envBusy       = "HELPER_BUSY"        // busy: how long the long call lasts
	envPong       = "HELPER_PONG"        // close-then-exit: "yes" answers pings
	envGrandGroup = "HELPER_GRAND_GROUP" // fork-grandchild: "own" or "same" process group
	envSleep      = "HELPER_SLEEP"       // grandchild: how long it lives
	envTracee     = "HELPER_TRACEE"      // tracer: the pid to ptrace
	envCounter    = "HELPER_COUNTER"     // flaky-start: a file with one byte per start
	envCrashes    = "HELPER_CRASHES"     // flaky-start: how many starts crash before ready
	envReadPace   = "HELPER_READ_PACE"   // slow-reader: the pause between two reads of control-in
	envGrow       = "HELPER_GROW"        // grow: the bytes of heap it allocates and touches
)

var (
	usedMu sync.Mutex
	used   = map[string]bool{}
)

func TestMain(m *testing.M) {
	// An exec child (no subagent marker: exec children get no AGENT_
	// variable) names its helper on argv.
	if len(os.Args) > 2 && os.Args[1] == execHelperArg {
		h, ok := execHelpers[os.Args[2]]
		if !ok {
			fmt.Fprintf(os.Stderr, "no exec helper %q\n", os.Args[2])
			os.Exit(99)
		}
		os.Exit(h(os.Args[3:]))
	}
	if os.Getenv(api.EnvSubagent) != "" {
		h, ok := helpers[os.Getenv(envHelper)]
		if !ok {
			fmt.Fprintf(os.Stderr, "no helper %q\n", os.Getenv(envHelper))
			os.Exit(99)
		}
		os.Exit(h())
	}
	flag.Parse()
	code := testkit.LeakCheck(m.Run())
	if code == 0 && ranEveryTest() {
		var unused []string
		for name := range helpers {
			if !used[name] {
				unused = append(unused, name)
			}
		}
		for name := range execHelpers {
			if !used[execHelperArg+" "+name] {
				unused = append(unused, execHelperArg+" "+name)
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

// ranEveryTest reports whether this run ran every test of the package: no
// -run or -skip narrowed it, it was no -list (which runs none), and -short
// skipped none. Only then is a helper no test used a helper nobody needs.
func ranEveryTest() bool {
	for _, name := range []string{"test.run", "test.skip", "test.list"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return !testing.Short()
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

// serve answers ctrl/ping from its own goroutine, like the real agent's control
// reader, delivers responses to tool calls on replies, and calls onCancel (if
// set) when ctrl/cancel arrives. It returns at once.
func (c *childIO) serve(onCancel func(reason string)) (replies <-chan *api.Frame) {
	ch := make(chan *api.Frame, 4)
	go func() {
		for {
			f, err := c.r.Read()
			if err != nil {
				close(ch)
				return
			}
			switch {
			case f.IsResponse():
				ch <- f
			case f.Method == api.MethodPing:
				var p api.Ping
				_ = api.DecodeParams(f, &p)
				_ = c.w.Send(api.MethodPong, 0, p)
			case f.Method == api.MethodCancel && onCancel != nil:
				var p api.Cancel
				_ = api.DecodeParams(f, &p)
				onCancel(p.Reason)
			}
		}
	}()
	return ch
}

// sleepForever blocks until a signal ends the process.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func envDuration(name string) time.Duration {
	d, err := time.ParseDuration(os.Getenv(name))
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper: %s: %v\n", name, err)
		os.Exit(98)
	}
	return d
}

// helperResponsive answers pings and, on ctrl/cancel, reports cancelled.
func helperResponsive() int {
	c := helperIO()
	c.start()
	c.serve(func(string) {
		_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText("stopped")})
		os.Exit(0)
	})
	sleepForever()
	return 0
}

// helperGrow answers pings, allocates HELPER_GROW bytes of heap and writes
// every page of them (so they are resident), and waits, holding them; on
// ctrl/cancel it reports cancelled.
func helperGrow() int {
	c := helperIO()
	c.start()
	c.serve(func(string) {
		_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText("stopped")})
		os.Exit(0)
	})
	n, err := strconv.Atoi(os.Getenv(envGrow))
	if err != nil {
		return 98
	}
	held := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		held[i] = 1
	}
	_ = c.w.Send(api.MethodEvent, 0, api.LoopEvent{Step: 1, Kind: api.EventModel, UsageDelta: api.Usage{Steps: 1}})
	sleepForever()
	runtime.KeepAlive(held)
	return 0
}

// helperBusy makes one long call (HELPER_BUSY) while its control reader keeps
// answering pings, then completes. On ctrl/cancel it reports what it has.
func helperBusy() int {
	c := helperIO()
	c.start()
	c.serve(func(string) {
		_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCancelled, Distillate: api.InlineText("partial work")})
		os.Exit(0)
	})
	time.Sleep(envDuration(envBusy))
	_ = c.w.Send(api.MethodEvent, 0, api.LoopEvent{Step: 1, Kind: api.EventModel, UsageDelta: api.Usage{TokensIn: 5, TokensOut: 5, Steps: 1}})
	_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("done after a long call")})
	return 0
}

// helperSlowTool calls the tool slow/wait, which the supervisor serves slowly,
// answering pings while it waits, and completes with the tool's text.
func helperSlowTool() int {
	c := helperIO()
	c.start()
	replies := c.serve(nil)
	if err := c.w.Send(api.MethodToolCall, 1, api.ToolCall{Tool: "slow/wait"}); err != nil {
		return 1
	}
	f, ok := <-replies
	if !ok {
		return 1
	}
	var r api.ToolResult
	if err := json.Unmarshal(f.Result, &r); err != nil {
		return 1
	}
	_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("tool said: " + r.Text())})
	return 0
}

// helperCloseThenExit closes control-out on SIGUSR2 and exits 1 on SIGUSR1,
// so a test controls the gap between EOF and the reap. It answers pings only
// when HELPER_PONG is "yes".
func helperCloseThenExit() int {
	usr := make(chan os.Signal, 2)
	signal.Notify(usr, syscall.SIGUSR1, syscall.SIGUSR2)
	c := helperIO()
	c.start()
	if os.Getenv(envPong) == "yes" {
		c.serve(nil)
	}
	for sig := range usr {
		if sig == syscall.SIGUSR1 {
			return 1
		}
		os.Stdout.Close()
	}
	return 1
}

// helperForkGrandchild starts a grandchild (the test binary as "grandchild"),
// in its own process group or in this one (HELPER_GRAND_GROUP), reports its
// pid in the distillate, and exits at once, orphaning it.
func helperForkGrandchild() int {
	return forkGrandchild(os.Getenv(envGrandGroup) == "own", nil) // stdio is /dev/null: control-out stays ours
}

// forkGrandchild does the child half of the handshake, starts a grandchild
// (the test binary as "grandchild"), in its own process group if ownGroup,
// with stdout as its stdout (nil: /dev/null), completes with the
// grandchild's pid as the distillate, and returns the helper's exit code.
func forkGrandchild(ownGroup bool, stdout *os.File) int {
	c := helperIO()
	c.start()
	exe, err := os.Executable()
	if err != nil {
		return 1
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envHelper+"=grandchild")
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if ownGroup {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		return 1
	}
	_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText(strconv.Itoa(cmd.Process.Pid))})
	return 0
}

// helperGrandchild lives for HELPER_SLEEP and exits 0.
func helperGrandchild() int {
	time.Sleep(envDuration(envSleep))
	return 0
}

// helperResultThenHang sends its result and then neither exits nor closes
// control-out; it ignores ctrl/cancel (SIGTERM ends it).
func helperResultThenHang() int {
	c := helperIO()
	c.start()
	c.serve(nil)
	_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("done")})
	sleepForever()
	return 0
}

// helperTraced lets any process ptrace it, ignores SIGTERM and ctrl/cancel,
// and answers pings: a child a tracer can make unreapable.
func helperTraced() int {
	if err := unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0); err != nil && err != unix.EINVAL {
		return 1 // EINVAL: no Yama, nothing to allow
	}
	signal.Ignore(syscall.SIGTERM)
	c := helperIO()
	c.start()
	c.serve(nil)
	sleepForever()
	return 0
}

// helperTracer attaches to HELPER_TRACEE with PTRACE_SEIZE and then never waits
// for it: once the tracee dies, its zombie is visible only to this tracer, so
// its real parent cannot reap it until the tracer goes away.
func helperTracer() int {
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
	pid, err := strconv.Atoi(os.Getenv(envTracee))
	if err != nil {
		return 2
	}
	runtime.LockOSThread() // the tracer is this thread; it must outlive the test
	if err := unix.PtraceSeize(pid); err != nil {
		fmt.Fprintln(os.Stderr, "tracer: PTRACE_SEIZE:", err)
		return 3
	}
	sleepForever()
	return 0
}

func helperComplete() int {
	c := helperIO()
	p := c.start()
	fmt.Fprintf(os.Stderr, `{"level":"INFO","msg":"helper working","objective_len":%d}`+"\n", len(p.Contract.Objective))
	_ = c.w.Send(api.MethodEvent, 0, api.LoopEvent{Step: 1, Kind: api.EventModel, UsageDelta: api.Usage{TokensIn: 30, TokensOut: 12, Steps: 1}})
	_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("echo: " + p.Contract.Objective), Usage: api.Usage{TokensIn: 1, TokensOut: 1, Steps: 1}})
	return 0
}

// helperRehearser is an agentd-like pool child: it logs each ctrl/rehearse
// that comes before its spawn frame ("helper rehearsed", its pid), and
// completes with how many came; given the objective "hold", it runs until
// ctrl/cancel.
func helperRehearser() int {
	c := helperIO()
	if err := c.w.Send(api.MethodReady, 0, api.Ready{PID: os.Getpid()}); err != nil {
		return 90
	}
	n := 0
	var f *api.Frame
	for {
		var err error
		if f, err = c.r.Read(); err != nil {
			return 91
		}
		if f.Method == api.MethodSpawn {
			break
		}
		if f.Method != api.MethodRehearse {
			return 92
		}
		n++
		fmt.Fprintf(os.Stderr, `{"level":"INFO","msg":"helper rehearsed","helper_pid":%d}`+"\n", os.Getpid())
	}
	var p api.SpawnPayload
	if err := api.DecodeParams(f, &p); err != nil {
		return 93
	}
	if p.Contract.Objective == "hold" {
		// Runs until ctrl/cancel.
		fmt.Fprintf(os.Stderr, `{"level":"INFO","msg":"helper holding","helper_pid":%d}`+"\n", os.Getpid())
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
	_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText(fmt.Sprintf("rehearsals=%d", n)), Usage: api.Usage{Steps: 1}})
	return 0
}

// helperGCEnv completes with the Go runtime's settings it started with: its
// memory limit and GOGC, as the runtime applied them.
func helperGCEnv() int {
	c := helperIO()
	c.start()
	limit := debug.SetMemoryLimit(-1)
	gogc := debug.SetGCPercent(-1)
	debug.SetGCPercent(gogc)
	_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText(fmt.Sprintf("limit=%d gogc=%d procs=%d memprofilerate=%d godebug=%s", limit, gogc, runtime.GOMAXPROCS(0), runtime.MemProfileRate, os.Getenv("GODEBUG"))), Usage: api.Usage{Steps: 1}})
	return 0
}

// helperStreams streams its answer in three text events (one claiming usage,
// which is not counted), reports the model call, then completes.
func helperStreams() int {
	c := helperIO()
	c.start()
	for _, ev := range []api.LoopEvent{
		{Step: 1, Kind: api.EventText, Text: "streamed "},
		{Step: 1, Kind: api.EventText, Text: "answer", UsageDelta: api.Usage{TokensIn: 5000}},
		{Step: 2, Kind: api.EventText, Text: "next turn"},
		{Step: 2, Kind: api.EventModel, UsageDelta: api.Usage{TokensIn: 30, TokensOut: 12, Steps: 1}},
	} {
		_ = c.w.Send(api.MethodEvent, 0, ev)
	}
	_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("next turn"), Usage: api.Usage{TokensIn: 30, TokensOut: 12, Steps: 1}})
	return 0
}

// helperCooperative works until ctrl/cancel, then reports cancelled. It does
// not answer pings.
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

// slowReader reads at most 4 KiB at a time, pausing pace before each read:
// a child the machine's load slows, reading steadily.
type slowReader struct {
	r    io.Reader
	pace time.Duration
}

func (s slowReader) Read(b []byte) (int, error) {
	time.Sleep(s.pace)
	return s.r.Read(b[:min(len(b), 4<<10)])
}

// helperSlowReader reads its spawn payload slowly but steadily
// (HELPER_READ_PACE between reads of 4 KiB), then completes with the
// objective's length.
func helperSlowReader() int {
	c := &childIO{w: api.NewFrameWriter(os.Stdout, 0), r: api.NewFrameReader(slowReader{os.Stdin, envDuration(envReadPace)}, 0)}
	p := c.start()
	_ = c.w.Send(api.MethodResult, 0, api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText(fmt.Sprint("read ", len(p.Contract.Objective))), Usage: api.Usage{Steps: 1}})
	return 0
}

// helperNoRead sends ctrl/ready and never reads control-in.
func helperNoRead() int {
	c := helperIO()
	if err := c.w.Send(api.MethodReady, 0, api.Ready{PID: os.Getpid()}); err != nil {
		return 90
	}
	sleepForever()
	return 0
}

// helperIgnoreTerm answers pings but ignores ctrl/cancel and SIGTERM: only
// SIGKILL ends it.
func helperIgnoreTerm() int {
	signal.Ignore(syscall.SIGTERM)
	c := helperIO()
	c.start()
	c.serve(nil)
	sleepForever()
	return 0
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

// helperFlakyStart counts its starts in HELPER_COUNTER (a byte appended per
// start) and exits 3 before ctrl/ready for the first HELPER_CRASHES of them: a
// binary that is broken until it is not. After that it behaves as complete.
func helperFlakyStart() int {
	f, err := os.OpenFile(os.Getenv(envCounter), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return 96
	}
	f.Write([]byte{'x'})
	f.Close()
	fi, err := os.Stat(os.Getenv(envCounter))
	crashes, _ := strconv.Atoi(os.Getenv(envCrashes))
	if err != nil || fi.Size() <= int64(crashes) {
		return 3
	}
	return helperComplete()
}

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

// markUsed records that a test exercises a helper (for helpers a test does not
// start through newSupervisor, such as a grandchild or a tracer).
func markUsed(helper string) {
	usedMu.Lock()
	used[helper] = true
	usedMu.Unlock()
}

// withEnv adds helper settings to the children's environment.
func withEnv(kv ...string) func(*Config) {
	return func(c *Config) { c.Env = append(c.Env, kv...) }
}

// wantRungs checks the ladder rungs a supervisor took, from its counters.
func wantRungs(t *testing.T, s *Supervisor, cancels, terms, kills int64) {
	t.Helper()
	st := s.Stats()
	if st.Cancels != cancels || st.Terms != terms || st.Kills != kills {
		t.Errorf("ladder rungs: ctrl/cancel %d, SIGTERM %d, SIGKILL %d; want %d, %d, %d", st.Cancels, st.Terms, st.Kills, cancels, terms, kills)
	}
}

// wantVerdicts checks the supervisor's verdicts, from its counters.
func wantVerdicts(t *testing.T, s *Supervisor, want map[string]int64) {
	t.Helper()
	got := s.Stats().Verdicts
	if len(got) != len(want) {
		t.Errorf("verdicts = %v, want %v", got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("verdicts = %v, want %v", got, want)
			return
		}
	}
}

// newSupervisor returns a supervisor whose children run the named helper.
func newSupervisor(t *testing.T, helper string, mutate ...func(*Config)) (*Supervisor, *testkit.Buffer) {
	t.Helper()
	markUsed(helper)
	logs := &testkit.Buffer{}
	cfg := fastConfig(logs)
	// The race detector sleeps a second at exit by default; a helper exits at once.
	cfg.Env = []string{envHelper + "=" + helper, "GORACE=atexit_sleep_ms=0"}
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
		if t.Failed() {
			t.Logf("supervisor log:\n%s", logs.String())
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
// process group is gone. A run a failed test left going is cancelled first, so
// the failure is reported rather than hung on.
func start(t *testing.T, s *Supervisor, p api.SpawnPayload) *Run {
	t.Helper()
	r, err := s.Start(context.Background(), StartRequest{Payload: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !isDone(r) && t.Failed() {
			s.Cancel(r.Handle(), "test failed")
		}
		select {
		case <-r.Done():
		case <-time.After(30 * time.Second):
			t.Errorf("run %s did not end within 30s", r.Handle())
			return
		}
		if pid := r.Info().PID; pid > 0 {
			testkit.WaitGroupGone(t, pid)
		}
	})
	return r
}

// waitPID polls until the run's child is running its payload, and returns its pid.
func waitPID(t *testing.T, r *Run) int {
	t.Helper()
	var pid int
	testkit.WaitFor(t, 5*time.Second, "the child running its payload", func() bool {
		in := r.Info()
		pid = in.PID
		return in.State == StateRunning
	})
	return pid
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
