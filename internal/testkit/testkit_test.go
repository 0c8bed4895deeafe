package testkit

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// envChild makes the test binary a child that sleeps until killed.
const envChild = "TESTKIT_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprintf(&b, "{\"msg\":\"w%d\"}\n", i)
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
	if n := len(b.Records("w3")); n != 100 {
		t.Fatalf("%d records of w3, want 100", n)
	}
}

func TestJSONLines(t *testing.T) {
	recs := JSONLines("{\"msg\":\"a\",\"k\":1}\nnot json\n[1]\nnull\n{\"msg\":\"b\"}\n\n{\"msg\":\"a\"}")
	if len(recs) != 3 {
		t.Fatalf("records %v, want the three objects", recs)
	}
	if a := WithMsg(recs, "a"); len(a) != 2 || a[0]["k"] != 1.0 {
		t.Fatalf("WithMsg(a) = %v", a)
	}
	if none := WithMsg(recs, "c"); len(none) != 0 {
		t.Fatalf("WithMsg(c) = %v", none)
	}
}

// fatalTB records a Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}
func (f *fatalTB) Errorf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, time.Second, "three polls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("cond evaluated %d times, want 3", n)
	}
	f := &fatalTB{TB: t}
	start := time.Now()
	WaitFor(f, 20*time.Millisecond, "the impossible", func() bool { return false })
	if f.msg != "the impossible: not within 20ms" {
		t.Fatalf("failure message %q", f.msg)
	}
	if d := time.Since(start); d < 20*time.Millisecond || d > 2*time.Second {
		t.Fatalf("gave up after %s, want about 20ms", d)
	}
	if Poll(10*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
	if !Poll(0, func() bool { return true }) {
		t.Fatal("Poll missed a condition that held at once")
	}
}

// TestProcesses runs the test binary as a child in a process group of its
// own and follows it through running, stopped and dead.
func TestProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envChild+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	if !slices.Contains(Children(os.Getpid()), pid) {
		t.Fatalf("child %d not among %v", pid, Children(os.Getpid()))
	}
	if !Alive(pid) || GroupGone(pid) || GroupDead(pid) {
		t.Fatalf("running child: alive %v, group gone %v, dead %v", Alive(pid), GroupGone(pid), GroupDead(pid))
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 5*time.Second, "the child stopped", func() bool { return Stopped(pid) })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Killed but not reaped: a zombie, dead but not gone.
	WaitFor(t, 5*time.Second, "the child dead", func() bool { return !Alive(pid) })
	if !GroupDead(pid) || GroupGone(pid) {
		t.Fatalf("zombie: group dead %v, gone %v", GroupDead(pid), GroupGone(pid))
	}
	f := &fatalTB{TB: t}
	if Stopped(pid) {
		t.Fatal("a zombie counted as stopped")
	}
	_ = cmd.Wait()
	waited = true
	WaitGroupGone(f, pid)
	if f.msg != "" || !GroupGone(pid) {
		t.Fatalf("reaped child's group: %q", f.msg)
	}
}

// TestFreePort: a port below the ephemeral range, bindable, and never the
// same twice; binding port 0 meanwhile never yields it.
func TestFreePort(t *testing.T) {
	low := ephemeralLow()
	if low <= freePortFloor+1000 {
		t.Skipf("ephemeral range starts at %d: FreePort binds port 0", low)
	}
	seen := map[int]bool{}
	for range 50 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < freePortFloor || p >= low || seen[p] {
			t.Fatalf("port %d: outside [%d, %d) or given twice", p, freePortFloor, low)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d cannot be bound: %v", p, err)
		}
		ln.Close()
	}
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if seen[p] {
			t.Fatalf("a bind to port 0 was given %d, which FreePort had handed out", p)
		}
	}
}
