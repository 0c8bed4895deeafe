package supervisor

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

func init() {
	helpers["flood-before-ready"] = helperFloodBeforeReady
	helpers["flood-after-violation"] = helperFloodAfterViolation
	helpers["stdout-grandchild"] = helperStdoutGrandchild
}

// flood returns first followed by 40 loop/event frames, ready to be written
// with one write (well under PIPE_BUF, so it lands whole).
func flood(first []byte) []byte {
	var b bytes.Buffer
	b.Write(first)
	w := api.NewFrameWriter(&b, 0)
	for i := 0; i < 40; i++ {
		_ = w.Send(api.MethodEvent, 0, api.LoopEvent{Step: i, Kind: api.EventStep})
	}
	return b.Bytes()
}

// helperFloodBeforeReady sends 40 loop/event frames instead of ctrl/ready and
// waits to be killed.
func helperFloodBeforeReady() int {
	os.Stdout.Write(flood(nil))
	select {}
}

// helperFloodAfterViolation takes its payload, then sends a loop/event with
// negative usage (a protocol violation) followed by 40 good ones, and waits to
// be killed.
func helperFloodAfterViolation() int {
	c := helperIO()
	c.start()
	var bad bytes.Buffer
	_ = api.NewFrameWriter(&bad, 0).Send(api.MethodEvent, 0, api.LoopEvent{Step: 1, Kind: api.EventStep, UsageDelta: api.Usage{TokensIn: -1}})
	os.Stdout.Write(flood(bad.Bytes()))
	select {}
}

// helperStdoutGrandchild starts a grandchild in its own process group that
// inherits control-out (and lives HELPER_SLEEP), completes with its pid, and
// exits: control-out stays open after the reap.
func helperStdoutGrandchild() int { return forkGrandchild(true, os.Stdout) }

// readersIn counts the goroutines delivering a child's frames kept
// (frameStream.drain) whose dump header names state ("select"; "": any).
func readersIn(state string) int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "["+state) && strings.Contains(g, "supervisor.(*frameStream).drain(") {
			count++
		}
	}
	return count
}

// Regression: a child killed while frames it sent were still undelivered left
// its frame reader blocked on the frame channel for good, holding control-out
// open (a goroutine and a descriptor per such child). Once the node's
// supervision ends, nobody reads its frames, and the reader must stop (the
// goroutine that delivers the frames kept, frameStream.drain).
func TestFrameReaderStopsWhenNobodyReads(t *testing.T) {
	for _, tc := range []struct {
		helper string
		cause  string
	}{
		{"flood-before-ready", api.CauseProtocolViolation}, // the first frame is not ctrl/ready
		{"flood-after-violation", api.CauseProtocolViolation},
	} {
		t.Run(tc.helper, func(t *testing.T) {
			s, _ := newSupervisor(t, tc.helper)
			res := result(t, start(t, s, testPayload("x", time.Minute)), 10*time.Second)
			if res.Status != api.StatusCrashed || res.Cause != tc.cause {
				t.Fatalf("result = %+v", res)
			}
			testkit.WaitFor(t, 10*time.Second, "no frame reader blocked sending", func() bool { return readersIn("") == 0 })
		})
	}
}

// Regression: a grandchild in its own process group that holds control-out
// open kept the frame reader of a finished node blocked in its read, and the
// pipe open, for as long as the grandchild lived.
func TestFrameReaderStopsWhenControlOutStaysOpen(t *testing.T) {
	subreaper(t)
	markUsed("grandchild")
	s, _ := newSupervisor(t, "stdout-grandchild", withEnv(envSleep+"=1h"), func(c *Config) { c.ReapGrace = 200 * time.Millisecond })
	before := theFramePoller.count()
	res := result(t, start(t, s, testPayload("x", time.Minute)), 10*time.Second)
	if res.Status != api.StatusCompleted {
		t.Fatalf("result = %+v", res)
	}
	gpid, err := strconv.Atoi(res.Distillate.Text())
	if err != nil {
		t.Fatalf("distillate %q is not the grandchild's pid", res.Distillate.Text())
	}
	t.Cleanup(func() {
		_ = unix.Kill(gpid, unix.SIGKILL) // reparented here and reaped as an orphan
		testkit.WaitGroupGone(t, gpid)
	})
	testkit.WaitFor(t, 10*time.Second, "the finished node's reader stopped", func() bool { return theFramePoller.count() <= before })
}

// Regression: when a kill came between a child's ctrl/ready and its payload,
// the ladder and the supervising goroutine (killNow) both SIGKILLed it and both
// reported it if it would not reap, so the rung and unreaped counts were
// doubled; KillAll counted a process its ladder had already SIGKILLed. Each is counted once per process. (A proc that is no child of ours
// stands in: signalling it is refused, but the counts are taken first.)
func TestKillAndUnreapedCountedOncePerProcess(t *testing.T) {
	s, err := New(Config{}) // starts nothing: no Shutdown to check
	if err != nil {
		t.Fatal(err)
	}
	n := newNode("h", nil, testPayload("x", time.Minute))
	p := &proc{pid: 1 << 30, done: make(chan struct{})} // no such child
	s.kill(n, p, "ladder")
	s.kill(n, p, "killNow")
	n.setProc(p)
	s.nodes[n.handle] = n
	s.KillAll() // the second signal
	delete(s.nodes, n.handle)
	if st := s.Stats(); st.Kills != 1 {
		t.Errorf("SIGKILL rungs = %d for one process, want 1", st.Kills)
	}
	if !s.unreapable(p) || s.unreapable(p) {
		t.Error("unreapable did not report the process exactly once")
	}
	if n := s.Unreaped(); n != 1 {
		t.Errorf("unreaped = %d for one process, want 1", n)
	}
}
