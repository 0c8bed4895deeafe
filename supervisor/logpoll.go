package supervisor

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Every child's stderr is forwarded by one goroutine, not one a child.
//
// A goroutine parked on each child's stderr pipe was a goroutine, its 4 KiB
// stack and an *os.File in the runtime's poller for each of hundreds of
// waiting children (issue 35: the supervisor's memory per live child,
// TestGoroutinesPerChild). theLogPoller holds the supervisor's read ends
// in an epoll set of its own, level-triggered, and one goroutine waits on
// it: it reads what a pipe has into its one buffer, forwards the lines
// (forwardLine, through the child's logger as it stands) and keeps only a
// line begun and not yet ended, and at EOF (or a failed read) forwards
// that, closes the read end and tells the child's procExit (logsEnded).
// The goroutine runs while a pipe is in the set and ends when the last
// one has: a supervisor with no child has none.

// logStream is one child's stderr in the poller.
type logStream struct {
	fd    int
	log   *atomic.Pointer[slog.Logger]
	lines lineSplitter
	ended func() // called once, after the last line is forwarded and fd closed
}

// logPoller is the epoll set of every forwarded stderr and its goroutine.
type logPoller struct {
	initOnce sync.Once
	ep       int
	initErr  error

	mu      sync.Mutex
	streams map[int32]*logStream // by fd
	running bool                 // the goroutine runs (or is starting)
}

var theLogPoller logPoller

func (lp *logPoller) init() error {
	lp.initOnce.Do(func() {
		lp.ep, lp.initErr = unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if lp.initErr != nil {
			lp.initErr = fmt.Errorf("epoll_create1: %w", lp.initErr)
		}
		lp.streams = make(map[int32]*logStream)
	})
	return lp.initErr
}

// add forwards the non-blocking read end fd, which it owns from now on,
// until EOF; ended is called once it has.
func (lp *logPoller) add(fd int, log *atomic.Pointer[slog.Logger], ended func()) error {
	if err := lp.init(); err != nil {
		return err
	}
	st := &logStream{fd: fd, log: log, ended: ended}
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

// run forwards the pipes' lines until the set is empty.
func (lp *logPoller) run() {
	var events [32]unix.EpollEvent
	buf := make([]byte, 4<<10)
	for {
		n, err := unix.EpollWait(lp.ep, events[:], -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			lp.failAll()
			return
		}
		for _, ev := range events[:n] {
			lp.mu.Lock()
			st := lp.streams[ev.Fd]
			lp.mu.Unlock()
			if st != nil {
				lp.readOnce(st, buf)
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

// readOnce reads what st's pipe has (one buffer: the set is
// level-triggered) and forwards its whole lines; at EOF or a failed read
// it ends st.
func (lp *logPoller) readOnce(st *logStream, buf []byte) {
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
	lp.remove(st)
}

// remove takes st out of the set, closes its read end and tells its end.
func (lp *logPoller) remove(st *logStream) {
	lp.mu.Lock()
	delete(lp.streams, int32(st.fd))
	_ = unix.EpollCtl(lp.ep, unix.EPOLL_CTL_DEL, st.fd, nil)
	lp.mu.Unlock()
	unix.Close(st.fd)
	st.ended()
}

// failAll ends every stream when the epoll set cannot be waited on (it
// never fails on a valid set): their lines are not forwarded, and no
// child's exit waits for them. A stream added after it starts a new
// goroutine.
func (lp *logPoller) failAll() {
	lp.mu.Lock()
	lp.running = false
	var all []*logStream
	for _, st := range lp.streams {
		all = append(all, st)
	}
	lp.mu.Unlock()
	for _, st := range all {
		lp.remove(st)
	}
}
