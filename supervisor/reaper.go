package supervisor

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// ExitStatus is how a reaped process ended.
type ExitStatus struct {
	Pid    int
	Status unix.WaitStatus
}

// Code is the conventional exit code: the exit status, or 128+signal.
func (e ExitStatus) Code() int {
	if e.Status.Signaled() {
		return 128 + int(e.Status.Signal())
	}
	return e.Status.ExitStatus()
}

// String describes the end: "exit N", or "killed by SIGNAME" (the signal's
// name, such as SIGKILL; "signal N" for a number without one).
func (e ExitStatus) String() string {
	if e.Status.Signaled() {
		return "killed by " + signalName(e.Status.Signal())
	}
	return fmt.Sprintf("exit %d", e.Status.ExitStatus())
}

// signalName is the signal's constant name (SIGKILL, SIGTERM); a signal with
// no name (a real-time one) is "signal N". syscall.Signal's String is the
// strsignal text ("killed", "terminated"), which read as "killed by killed".
func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// reaper is the process-wide owner of wait4 and of fork. See the package doc.
type reaper struct {
	once sync.Once

	mu      sync.Mutex               // guards waiters; held across fork+register and across each wait4
	waiters map[int]func(ExitStatus) // live known children by pid: what to call with the status

	forks   chan forkRequest
	orphans atomic.Int64
	log     atomic.Pointer[slog.Logger]
}

type forkRequest struct {
	argv0 string
	argv  []string
	attr  *syscall.ProcAttr
	exit  func(ExitStatus)
	reply chan forkReply
}

type forkReply struct {
	pid int
	err error
}

var theReaper = &reaper{}

func (r *reaper) start(log *slog.Logger) {
	if log != nil {
		// Orphans are logged with the logger of the latest Supervisor (a process
		// hosts one; tests host one at a time).
		r.log.Store(log)
	}
	r.once.Do(func() {
		r.waiters = make(map[int]func(ExitStatus))
		r.forks = make(chan forkRequest)
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGCHLD)
		go r.reapOnSIGCHLD(sig)
		go r.forker()
		// Anything that exited before the handler was installed.
		r.drain()
	})
}

// reapOnSIGCHLD drains at every SIGCHLD, for the life of the process.
func (r *reaper) reapOnSIGCHLD(sig <-chan os.Signal) {
	for range sig {
		r.drain()
	}
}

// forker performs every fork on one goroutine locked to its thread for the life
// of the process, so that a child's parent thread never exits under it.
func (r *reaper) forker() {
	runtime.LockOSThread() // never unlocked: this thread is the parent of every child
	for req := range r.forks {
		r.mu.Lock()
		pid, err := syscall.ForkExec(req.argv0, req.argv, req.attr)
		if err == nil {
			r.waiters[pid] = req.exit
		}
		r.mu.Unlock()
		req.reply <- forkReply{pid: pid, err: err}
	}
}

// fork starts a process and registers exit to receive its status exactly
// once (exit must have room for it: the reaper does not wait).
func (r *reaper) fork(argv0 string, argv []string, attr *syscall.ProcAttr, exit chan<- ExitStatus) (int, error) {
	return r.forkFunc(argv0, argv, attr, func(st ExitStatus) { exit <- st })
}

// forkFunc starts a process and registers onExit to be called with its
// status exactly once, by the reaper, which holds its lock: onExit must not
// block, nor signal or fork. A child's exit needs no goroutine waiting for
// it.
func (r *reaper) forkFunc(argv0 string, argv []string, attr *syscall.ProcAttr, onExit func(ExitStatus)) (int, error) {
	reply := make(chan forkReply, 1)
	r.forks <- forkRequest{argv0: argv0, argv: argv, attr: attr, exit: onExit, reply: reply}
	rep := <-reply
	return rep.pid, rep.err
}

// drain reaps every child that has exited.
func (r *reaper) drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD: no children at all; 0: none exited
		}
		onExit, known := r.waiters[pid]
		if !known {
			r.orphans.Add(1)
			if log := r.log.Load(); log != nil {
				log.Info("orphan reaped", "orphan", true, "pid", pid, "status", ExitStatus{pid, ws}.String())
			}
			continue
		}
		// Whatever the child left in its process group goes with it. The pid is
		// still reserved as a pgid while members remain, and no fork can run
		// while we hold mu, so this cannot hit a recycled group.
		_ = unix.Kill(-pid, unix.SIGKILL)
		delete(r.waiters, pid)
		onExit(ExitStatus{Pid: pid, Status: ws})
	}
}

// signalGroup sends sig to the process group led by pid, unless pid has been
// reaped. It reports whether the signal was sent.
func (r *reaper) signalGroup(pid int, sig unix.Signal) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, live := r.waiters[pid]; !live {
		return false
	}
	return unix.Kill(-pid, sig) == nil
}

// Orphans returns how many unknown (reparented) processes this process reaped.
func Orphans() int64 { return theReaper.orphans.Load() }

// EnableSubreaper makes this process the reaper of orphaned descendants
// (PR_SET_CHILD_SUBREAPER), so that grandchildren left by a dying subagent
// reparent here and are reaped, not to PID 1.
func EnableSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("supervisor: prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	return nil
}
