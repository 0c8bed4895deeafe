package agent

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// envTestChild makes the test binary a subagent: TestMain runs Main, as
// cmd/agentd does when the supervisor re-executes it.
const envTestChild = "AGENT_TEST_CHILD"

// realChild is a subagent process (the test binary running Main) over real
// pipes, the test playing its supervisor.
type realChild struct {
	cmd *exec.Cmd
	w   *api.FrameWriter
	inW *os.File // control-in's write end: closing it is the supervisor going away

	mu     sync.Mutex // guards frames
	frames []*api.Frame
	got    chan struct{} // a frame came
	exited chan error
}

// startRealChild starts the subagent, sends p once it is ready and keeps
// every frame it writes. The cleanup closes control-in and fails the test
// when the child does not exit on that (the supervisor's end closed).
func startRealChild(t *testing.T, p *api.SpawnPayload) *realChild {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envTestChild+"=1", "GOMAXPROCS=1", api.EnvSupervisorPID+"="+strconv.Itoa(os.Getpid()))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	c := &realChild{cmd: cmd, w: api.NewFrameWriter(inW, 0), inW: inW, got: make(chan struct{}, 1), exited: make(chan error, 1)}
	go func() { c.exited <- cmd.Wait() }()
	go func() {
		defer outR.Close()
		r := api.NewFrameReader(outR, 0)
		for {
			f, err := r.Read()
			if err != nil {
				return
			}
			if f.Method == api.MethodReady {
				if err := c.w.Send(api.MethodSpawn, 0, p); err != nil {
					t.Errorf("send spawn: %v", err)
				}
			}
			c.mu.Lock()
			c.frames = append(c.frames, f)
			c.mu.Unlock()
			select {
			case c.got <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-c.exited
			t.Error("the child did not exit when its control-in closed")
		}
	})
	return c
}

// waitFrame waits for a frame that match accepts.
func (c *realChild) waitFrame(t *testing.T, what string, match func(*api.Frame) bool) *api.Frame {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		for _, f := range c.frames {
			if match(f) {
				c.mu.Unlock()
				return f
			}
		}
		c.mu.Unlock()
		select {
		case <-c.got:
		case <-deadline:
			t.Fatalf("no %s from the child", what)
		}
	}
}

// ping sends ctrl/ping and waits for its pong: the child's reader of
// control-in has read a frame and gone back to reading.
func (c *realChild) ping(t *testing.T, seq uint64) {
	t.Helper()
	if err := c.w.Send(api.MethodPing, 0, api.Ping{Seq: seq}); err != nil {
		t.Fatal(err)
	}
	c.waitFrame(t, "pong", func(f *api.Frame) bool {
		var p api.Ping
		return f.Method == api.MethodPong && api.DecodeParams(f, &p) == nil && p.Seq == seq
	})
}

// procStatus returns a field of /proc/PID/status.
func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return ""
}

// threadsInRead returns how many of pid's threads are in read(2) on fd.
func threadsInRead(t *testing.T, pid, fd int) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue // the thread is gone, or not readable here
		}
		// "NR arg0 ...": read(2) is 0 on amd64, 63 on arm64.
		f := strings.Fields(string(b))
		if len(f) > 1 && (f[0] == "0" || f[0] == "63") && f[1] == fmt.Sprintf("0x%x", fd) {
			n++
		}
	}
	return n
}

// heldModel is an OpenAI-compatible model server whose every call waits
// until the test ends; called says when the first came.
func heldModel(t *testing.T) (*fakeLLM, <-chan struct{}) {
	called := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	hold := func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(called) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	f := newFakeLLM(t, hold, hold)
	t.Cleanup(func() { close(release) })
	return f, called
}

// A child waiting in its model call has no thread blocked in read(2) on
// control-in: the pipe is non-blocking and read through the runtime's
// netpoller, so the reader goroutine parks without a thread of its own
// (each thread is a kernel stack the cgroup charges, and its Go stack).
// Closing control-in still ends the child (the cleanup checks it).
func TestWaitingChildHasNoThreadInRead(t *testing.T) {
	f, called := heldModel(t)
	c := startRealChild(t, llmPayload(f))
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("the child made no model call")
	}
	c.ping(t, 1)
	pid := c.cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/0", pid))
	if err != nil {
		t.Fatal(err)
	}
	var flags uint64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, _ = strconv.ParseUint(strings.TrimSpace(v), 8, 64)
		}
	}
	if flags&0o4000 == 0 { // O_NONBLOCK
		t.Errorf("control-in is blocking (flags %o)", flags)
	}
	// The reader is back to reading after the pong; a blocking read enters
	// the kernel within microseconds, so a thread found in read(0) is the
	// old way. Polled, so that one is found if there is one.
	if found := pollFor(200, func() bool { return threadsInRead(t, pid, 0) > 0 }); found {
		t.Errorf("a thread of the waiting child is blocked in read(2) on control-in")
	}
	t.Logf("a waiting child: Threads %s", procStatus(t, pid, "Threads"))
}

// pollFor checks cond up to n times, yielding between checks, and reports
// whether it held once.
func pollFor(n int, cond func() bool) bool {
	for i := 0; i < n; i++ {
		if cond() {
			return true
		}
		runtime.Gosched()
	}
	return false
}
