package supervisor

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// A child's pipes are read by a goroutine shared by every child, not one a
// pipe.
//
// A goroutine parked on each of a child's pipes was a goroutine, its 4 KiB
// stack and an *os.File in the runtime's poller a pipe, for each of
// hundreds of waiting children (issue 35: the supervisor's memory per live
// child, TestGoroutinesPerChild). A poller holds the supervisor's read ends
// in an epoll set of its own, level-triggered, and one goroutine waits on
// it and hands each pipe that has bytes to its stream (one read each time).
// The goroutine runs while a pipe is in the set and ends when the last one
// has left it: a supervisor with no child has none. There are two pollers,
// so that a log writer that blocks never holds up the control channel:
// theLogPoller forwards every child's stderr (logStream), theFramePoller
// reads every child's control-out (frameStream, framepoll.go).

// pollee is a pipe in a poller's set.
type pollee interface {
	// readable reads what the pipe has, once, into buf (the poller's
	// own, not kept), on the poller's goroutine.
	readable(buf []byte)
}

// poller is an epoll set of pipes and its goroutine.
type poller struct {
	initOnce sync.Once
	ep       int
	epc      syscall.RawConn // ep in the runtime's poller: run parks on it
	wake     int             // an eventfd in the set: drop writes it when the set empties
	initErr  error

	mu      sync.Mutex
	streams map[int32]pollee // by fd
	running bool             // the goroutine runs (or is starting)
}

var (
	theLogPoller   poller // every child's stderr
	theFramePoller poller // every child's control-out
)

func (lp *poller) init() error {
	lp.initOnce.Do(func() {
		lp.streams = make(map[int32]pollee)
		var err error
		if lp.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
			lp.initErr = fmt.Errorf("epoll_create1: %w", err)
			return
		}
		// The set is itself pollable (readable while a pipe in it is): in
		// the runtime's poller, run parks on it as on any pipe, holding no
		// thread, where a blocking epoll_wait would hold a thread and its P
		// until the runtime took the P back (up to 10 ms on a quiet
		// process: timers, a ctrl/ready's deadline among them, fired late).
		if err = unix.SetNonblock(lp.ep, true); err == nil {
			lp.epc, err = os.NewFile(uintptr(lp.ep), "epoll").SyscallConn()
		}
		if err != nil {
			lp.initErr = fmt.Errorf("epoll set in the runtime's poller: %w", err)
			return
		}
		if lp.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
			lp.initErr = fmt.Errorf("eventfd: %w", err)
			return
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lp.wake)}
		if err := unix.EpollCtl(lp.ep, unix.EPOLL_CTL_ADD, lp.wake, &ev); err != nil {
			lp.initErr = fmt.Errorf("epoll_ctl add eventfd: %w", err)
		}
	})
	return lp.initErr
}

// add puts the non-blocking read end fd into the set, read by st.
func (lp *poller) add(fd int, st pollee) error {
	if err := lp.init(); err != nil {
		return err
	}
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.streams[int32(fd)] = st
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
	if err := unix.EpollCtl(lp.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		delete(lp.streams, int32(fd))
		return fmt.Errorf("epoll_ctl add: %w", err)
	}
	if !lp.running {
		lp.running = true
		go lp.run()
	}
	return nil
}

// drop takes fd out of the set (the caller closes it after). The set
// emptied, the goroutine is woken to end.
func (lp *poller) drop(fd int) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	delete(lp.streams, int32(fd))
	_ = unix.EpollCtl(lp.ep, unix.EPOLL_CTL_DEL, fd, nil)
	if len(lp.streams) == 0 && lp.running {
		var one [8]byte
		one[0] = 1 // little-endian 1: the eventfd counter's increment
		_, _ = unix.Write(lp.wake, one[:])
	}
}

// count is how many pipes are in the set.
func (lp *poller) count() int {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	return len(lp.streams)
}

// run reads the pipes until the set is empty.
func (lp *poller) run() {
	var events [32]unix.EpollEvent
	buf := make([]byte, 4<<10)
	for {
		var n int
		var werr error
		err := lp.epc.Read(func(uintptr) bool {
			// Never blocks: with nothing ready, the goroutine parks until
			// the set is readable.
			n, werr = ignoringEINTR(func() (int, error) { return unix.EpollWait(lp.ep, events[:], 0) })
			return werr != nil || n > 0
		})
		if err == nil {
			err = werr
		}
		if err != nil {
			lp.mu.Lock()
			lp.running = false // it never fails on a valid set; an add starts another
			lp.mu.Unlock()
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == int32(lp.wake) {
				var b [8]byte
				_, _ = unix.Read(lp.wake, b[:]) // reset; the set is checked below
				continue
			}
			lp.mu.Lock()
			st := lp.streams[ev.Fd]
			lp.mu.Unlock()
			if st != nil {
				st.readable(buf)
			}
		}
		lp.mu.Lock()
		if len(lp.streams) == 0 {
			lp.running = false
			lp.mu.Unlock()
			return
		}
		lp.mu.Unlock()
	}
}

// logStream is one child's stderr in theLogPoller: its lines are forwarded
// (forwardLine, through the child's logger as it stands), only a line begun
// and not yet ended kept between reads; at EOF (or a failed read) the rest
// is forwarded, the read end closed and the child's procExit told
// (logsEnded).
type logStream struct {
	fd    int
	log   *atomic.Pointer[slog.Logger]
	lines lineSplitter
	ended func() // called once, after the last line is forwarded and fd closed
}

// forwardStderr forwards the non-blocking read end fd, which it owns from
// now on, until EOF; ended is called once it has.
func forwardStderr(fd int, log *atomic.Pointer[slog.Logger], ended func()) error {
	return theLogPoller.add(fd, &logStream{fd: fd, log: log, ended: ended})
}

func (st *logStream) readable(buf []byte) {
	emit := func(line []byte) {
		if len(line) > 0 {
			forwardLine(st.log.Load(), line)
		}
	}
	n, err := ignoringEINTR(func() (int, error) { return unix.Read(st.fd, buf) })
	if err == unix.EAGAIN {
		return
	}
	if err == nil && n > 0 {
		st.lines.feed(buf[:n], emit)
		return
	}
	st.lines.end(emit)
	theLogPoller.drop(st.fd)
	unix.Close(st.fd)
	st.ended()
}
