package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
)

// proc is one running child process and its three pipes. An exec child's
// proc has no control channel: w, in, out and frames are nil (controlled
// reports false), and only the reap, the signals and the kill flags apply.
type proc struct {
	pid int
	w   *api.FrameWriter // control-in: the child's stdin
	in  *os.File         // our end of control-in; closed by release
	out *frameStream     // our end of control-out, read by theFramePoller (framepoll.go); closed by release

	frames  chan *api.Frame // control-out frames, closed after readErr is set (unless release came first)
	readErr error           // why control-out ended (io.EOF or a protocol violation); read after frames closes

	stop     chan struct{} // closed by release: nobody reads frames any more
	stopOnce sync.Once

	ready    atomic.Bool // ctrl/ready arrived
	spawned  atomic.Bool // the spawn frame has been written; ctrl/cancel is meaningful from here
	killed   atomic.Bool // the supervisor has sent SIGKILL to the group
	unreaped atomic.Bool // counted as a process that would not reap
	live     liveness    // detectors B and C, and the classifier's inputs

	done   chan struct{} // closed once the process is reaped
	status ExitStatus    // valid after done closes (an exec child's; a subagent's is in exit)
	exit   *procExit     // a subagent's end: its status, valid after done closes

	// log receives the child's stderr lines. A pooled child starts with the
	// pool's logger and is given its node's (run_id, agent_path) when assigned.
	log atomic.Pointer[slog.Logger]
}

// procSpec is what a start needs.
type procSpec struct {
	exe       string
	env       []string // complete, the subagent marker included; shared, never modified
	envs      *envSet  // the version env is of (a warm child with an older one is retired)
	maxFrame  int
	rlimitAS  uint64       // bytes; 0 leaves the inherited limit
	rlimitCPU uint64       // seconds; 0 leaves the inherited limit
	log       *slog.Logger // tagged with run_id and agent_path; child stderr lines go here
	// stderr, if set, is the child's stderr itself (Config.ChildStderr): its
	// lines go there directly and log is not used for them.
	stderr *os.File
	// writeWait bounds each write to control-in by the child's progress
	// (deadlineWriter), so a child that stopped reading (SIGSTOP, a full
	// pipe) cannot block the supervisor.
	writeWait time.Duration
}

// procSpec returns the start of one child: every child, cold or warm, gets the
// same binary, environment, rlimits and frame limit. log receives its stderr.
func (s *Supervisor) procSpec(log *slog.Logger) procSpec {
	envs := s.env.Load()
	return procSpec{
		exe:       s.cfg.Executable,
		env:       envs.vars,
		envs:      envs,
		maxFrame:  s.cfg.MaxFrame,
		rlimitAS:  s.cfg.RlimitAS,
		rlimitCPU: s.cfg.RlimitCPU,
		log:       log,
		stderr:    s.cfg.ChildStderr,
		writeWait: s.cfg.KillGrace,
	}
}

// startProc re-execs the binary in subagent mode in its own process group, with
// stdin/stdout as the control channel and stderr as its log stream.
func startProc(spec procSpec) (*proc, error) {
	inW, inR, err := childPipe(false, "control-in")
	if err != nil {
		return nil, fmt.Errorf("control-in pipe: %w", err)
	}
	outR, outW, err := controlOutPipe()
	if err != nil {
		inW.Close()
		unix.Close(inR)
		return nil, fmt.Errorf("control-out pipe: %w", err)
	}
	// The child's stderr: a pipe the supervisor forwards (theLogPoller),
	// or (not aggregated) the file the child writes its lines to itself.
	errR, errW := -1, -1
	if spec.stderr == nil {
		if errR, errW, err = logPipe(); err != nil {
			inW.Close()
			unix.Close(inR)
			unix.Close(outR)
			unix.Close(outW)
			return nil, fmt.Errorf("stderr pipe: %w", err)
		}
	}
	files := []uintptr{uintptr(inR), uintptr(outW), 0}
	if errR >= 0 {
		files[2] = uintptr(errW)
	} else {
		files[2] = spec.stderr.Fd()
	}
	attr := &syscall.ProcAttr{
		Env:   spec.env,
		Files: files,
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	// The exit is known when the reaper calls ex.exited (no goroutine waits
	// for it); done closes once the stderr forwarding has ended too.
	ex := &procExit{done: make(chan struct{}), logs: errR >= 0}
	pid, err := theReaper.forkFunc(spec.exe, []string{spec.exe, "subagent"}, attr, ex.exited)
	// The child holds its own copies now; ours must go so EOF can be seen.
	unix.Close(inR)
	unix.Close(outW)
	if errR >= 0 {
		unix.Close(errW)
	}
	if err != nil {
		inW.Close()
		unix.Close(outR)
		if errR >= 0 {
			unix.Close(errR)
		}
		return nil, fmt.Errorf("re-exec %s: %w", spec.exe, err)
	}
	setRlimits(pid, spec, spec.log)
	p := &proc{
		pid:    pid,
		w:      api.NewFrameWriter(deadlineWriter{inW, spec.writeWait}, spec.maxFrame),
		in:     inW,
		frames: make(chan *api.Frame, 16),
		stop:   make(chan struct{}),
		done:   ex.done,
		exit:   ex,
	}
	p.log.Store(spec.log)
	if errR >= 0 {
		if err := forwardStderr(errR, &p.log, ex.logsEnded); err != nil {
			unix.Close(errR) // its lines are lost; its exit does not wait for them
			spec.log.Warn("child stderr not forwarded", "pid", pid, "err", err)
			ex.logsEnded()
		}
	}
	if err := p.readFrames(outR, spec.maxFrame); err != nil {
		// No control channel: the child is killed and reaped.
		unix.Close(outR)
		inW.Close()
		_ = p.signal(unix.SIGKILL)
		return nil, fmt.Errorf("read control-out: %w", err)
	}
	return p, nil
}

// procExit is how a child's end becomes known: the reaper's status, and the
// end of its stderr. The child's last log lines may still be in its stderr
// pipe when it is reaped: they are forwarded before its exit is known (done),
// so they are logged before the node ends (and before a one-shot run exits);
// a grandchild that holds the pipe open bounds the wait at logDrainWait.
type procExit struct {
	done chan struct{} // closed once reaped and the stderr forwarded (or logDrainWait passed)
	logs bool          // a stderr pipe is forwarded

	mu       sync.Mutex
	status   ExitStatus
	reaped   bool
	logsDone bool
	closed   bool
}

// exited is the reaper's call with the status (under its lock: it must not
// block).
func (e *procExit) exited(st ExitStatus) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status, e.reaped = st, true
	if !e.logs || e.logsDone {
		e.closeLocked()
		return
	}
	time.AfterFunc(logDrainWait, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.closeLocked()
	})
}

// logsEnded records the end of the stderr forwarding.
func (e *procExit) logsEnded() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logsDone = true
	if e.reaped {
		e.closeLocked()
	}
}

func (e *procExit) closeLocked() {
	if !e.closed {
		e.closed = true
		close(e.done)
	}
}

// childPipe returns a pipe between the supervisor and a child: the
// supervisor's end (the read end when oursReads) as a non-blocking file in
// the runtime's poller, so its reads and writes honour deadlines and Close;
// the child's end as a plain blocking descriptor that never enters the
// poller, for the fork to hand over and the caller to close right after it.
// Both are close-on-exec.
func childPipe(oursReads bool, name string) (ours *os.File, theirs int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, -1, err
	}
	o, t := p[1], p[0]
	if oursReads {
		o, t = p[0], p[1]
	}
	if err := unix.SetNonblock(o, true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return nil, -1, err
	}
	return os.NewFile(uintptr(o), name), t, nil
}

// logDrainWait bounds how long a reaped child's exit waits for the rest of its
// stderr to be forwarded.
const logDrainWait = 100 * time.Millisecond

// deadlineWriter bounds every write to a pipe by the reader's progress: a
// write fails (os.ErrDeadlineExceeded) once a whole d passes in which the
// reader took none of its bytes, so a child that stopped reading is caught
// within 2d of its last read. A write that goes on being read, however
// slowly, is not cut short: a spawn payload of megabytes through a 64 KiB
// pipe to a child the machine's load slows may take longer than d in all
// (issue 28.8: 2 of 96 children with 3 MB payloads were killed at load
// 16-23, a slow pipe taken for a dead child).
type deadlineWriter struct {
	f *os.File
	d time.Duration
}

func (w deadlineWriter) Write(b []byte) (int, error) {
	if w.d <= 0 {
		return w.f.Write(b)
	}
	var n int
	for {
		_ = w.f.SetWriteDeadline(time.Now().Add(w.d))
		k, err := w.f.Write(b[n:])
		n += k
		if err == nil || k == 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		// The reader took bytes within d: a new d from now.
	}
}

// setRlimits applies the per-child resource limits with prlimit(2), right after
// the fork; the child is still starting its runtime at that point.
func setRlimits(pid int, spec procSpec, log *slog.Logger) {
	if spec.rlimitAS > 0 {
		lim := unix.Rlimit{Cur: spec.rlimitAS, Max: spec.rlimitAS}
		if err := unix.Prlimit(pid, unix.RLIMIT_AS, &lim, nil); err != nil {
			log.Warn("prlimit RLIMIT_AS", "pid", pid, "err", err)
		}
	}
	if spec.rlimitCPU > 0 {
		lim := unix.Rlimit{Cur: spec.rlimitCPU, Max: spec.rlimitCPU + 1}
		if err := unix.Prlimit(pid, unix.RLIMIT_CPU, &lim, nil); err != nil {
			log.Warn("prlimit RLIMIT_CPU", "pid", pid, "err", err)
		}
	}
}

// release ends our side of the control channel once nothing will read p's
// frames or write to it again (its node's supervision is over, or the warm
// pool discards it): control-in and control-out are closed, and the frame
// reader stops even if it is blocked delivering a frame nobody will take, or
// reading a pipe that a process outside the child's group still holds open.
// It is idempotent.
func (p *proc) release() {
	p.stopOnce.Do(func() {
		close(p.stop)
		if p.controlled() {
			p.in.Close()
			p.out.close()
		}
	})
}

// controlled reports whether p has a control channel: every subagent does,
// an exec child does not.
func (p *proc) controlled() bool { return p.w != nil }

// signal sends sig to the child's process group unless it has been reaped.
func (p *proc) signal(sig unix.Signal) bool { return theReaper.signalGroup(p.pid, sig) }

// exited reports whether the process has been reaped.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// forwardLogs copies a child's stderr, r, into the supervisor's log, and
// returns at its EOF (r is closed by then). A line that is a JSON object
// (the child's slog output) keeps its fields; anything else is logged as
// text. The logger (read per line, so an assignment can retag a pooled
// child) already carries run_id and agent_path. A line is kept up to
// maxLogLine bytes; the rest of a longer one is dropped. The lines are
// forwarded by theLogPoller, as startProc has a child's stderr forwarded:
// no goroutine of r's own waits on it, and no buffer is kept while the
// child is quiet but a line begun and not yet ended.
func forwardLogs(r *os.File, log *atomic.Pointer[slog.Logger]) {
	rc, err := r.SyscallConn()
	if err != nil {
		r.Close()
		return
	}
	fd := -1
	if cerr := rc.Control(func(f uintptr) { fd, err = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		err = cerr
	}
	r.Close()
	if err != nil {
		return
	}
	ended := make(chan struct{})
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return
	}
	if err := forwardStderr(fd, log, func() { close(ended) }); err != nil {
		unix.Close(fd)
		return
	}
	<-ended
}

// logPipe is a child's stderr pipe: the supervisor's read end
// non-blocking, for theLogPoller's epoll set (never the runtime's poller),
// and the child's write end, blocking, for the fork to hand over and the
// caller to close right after it. Both are close-on-exec.
func logPipe() (ours, theirs int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, -1, err
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		unix.Close(p[0])
		unix.Close(p[1])
		return -1, -1, err
	}
	return p[0], p[1], nil
}

// maxLogLine is the most of one stderr line forwarded.
const maxLogLine = 1 << 20

// ignoringEINTR calls read until it is not interrupted by a signal.
func ignoringEINTR(read func() (int, error)) (int, error) {
	for {
		n, err := read()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// lineSplitter cuts a byte stream into lines (without their newline), each
// kept up to maxLogLine bytes. Only a line that spans reads is copied.
type lineSplitter struct {
	part []byte // the line begun in an earlier read, up to maxLogLine bytes
}

// feed passes each line that b ends to emit (which must not keep it), and
// keeps the start of one it does not end.
func (l *lineSplitter) feed(b []byte, emit func([]byte)) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.keep(b)
			return
		}
		if l.part == nil {
			emit(b[:min(i, maxLogLine)])
		} else {
			l.keep(b[:i])
			emit(l.part)
			l.part = nil // nothing kept between lines
		}
		b = b[i+1:]
	}
}

func (l *lineSplitter) keep(b []byte) {
	l.part = append(l.part, b[:min(len(b), maxLogLine-len(l.part))]...)
}

// end passes on a last line the stream did not end with a newline.
func (l *lineSplitter) end(emit func([]byte)) {
	if l.part != nil {
		emit(l.part)
		l.part = nil
	}
}

func forwardLine(log *slog.Logger, line []byte) {
	var rec map[string]any
	if len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &rec) == nil {
		level := slog.LevelInfo
		if s, ok := rec["level"].(string); ok {
			_ = level.UnmarshalText([]byte(s))
		}
		msg, _ := rec["msg"].(string)
		attrs := make([]any, 0, 2*len(rec)+2)
		attrs = append(attrs, "child", true)
		// The child's key order is lost in a map: sorted, so the same line
		// renders the same each time.
		for _, k := range slices.Sorted(maps.Keys(rec)) {
			switch k {
			case "time", "level", "msg", "run_id", "agent_path":
				continue
			}
			attrs = append(attrs, k, rec[k])
		}
		log.Log(context.Background(), level, msg, attrs...)
		return
	}
	log.Info("child stderr", "child", true, "line", string(line))
}

// exitStatus is how the process ended; valid after done closes.
func (p *proc) exitStatus() ExitStatus {
	if p.exit != nil {
		return p.exit.status
	}
	return p.status
}
