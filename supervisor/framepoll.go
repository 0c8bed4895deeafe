package supervisor

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agentd/agentd/api"
)

// frameStream is one child's control-out in theFramePoller (logpoll.go):
// it decodes frames as api.FrameReader does (a 4-byte big-endian length,
// then the body, each read as it arrives) and hands each to p.frames. A
// frame that finds p.frames full is kept, the pipe leaves the set, and a
// goroutine of the stream's own (drain) delivers what is kept, waiting for
// room, and puts the pipe back: a child whose frames nobody takes yet
// costs a goroutine while that lasts, as it did before, and one that waits
// costs none. At the stream's end (EOF between frames is io.EOF, inside
// one io.ErrUnexpectedEOF; a frame over the limit api.ErrFrameTooLarge, a
// body that is no frame api.ErrFrameInvalid) the frames kept are
// delivered, then p.readErr is set and p.frames closed, and the read end
// closed. release closes the read end at once: nobody reads the frames any
// more.
type frameStream struct {
	p   *proc
	fd  int
	max int

	mu      sync.Mutex // guards what follows; held by a read, the drain's turns and close
	closed  bool       // the read end is closed: by the end, or by release
	hdr     [4]byte
	hn      int    // header bytes read
	body    []byte // the frame being read, nil between frames
	bn      int    // body bytes read
	pending []*api.Frame
	paused  bool  // out of the set while drain delivers pending
	endErr  error // the stream's end, once pending is delivered
}

// readFrames starts reading p's control-out, the non-blocking read end fd,
// which p owns from now on.
func (p *proc) readFrames(fd, max int) error {
	st := &frameStream{p: p, fd: fd, max: max}
	p.out = st
	return theFramePoller.add(fd, st)
}

func (st *frameStream) readable([]byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed || st.paused {
		return
	}
	var into []byte
	if st.body == nil {
		into = st.hdr[st.hn:]
	} else {
		into = st.body[st.bn:]
	}
	n, err := ignoringEINTR(func() (int, error) { return unix.Read(st.fd, into) })
	switch {
	case err == unix.EAGAIN:
		return
	case err != nil:
		st.endLocked(fmt.Errorf("read control-out: %w", err))
		return
	case n == 0:
		if st.hn == 0 && st.body == nil {
			st.endLocked(io.EOF)
		} else {
			st.endLocked(io.ErrUnexpectedEOF)
		}
		return
	}
	if st.body == nil {
		st.hn += n
		if st.hn < len(st.hdr) {
			return
		}
		size := binary.BigEndian.Uint32(st.hdr[:])
		switch {
		case size == 0:
			st.endLocked(fmt.Errorf("%w: empty frame", api.ErrFrameInvalid))
		case uint64(size) > uint64(st.max):
			st.endLocked(fmt.Errorf("%w: %d bytes, limit %d", api.ErrFrameTooLarge, size, st.max))
		default:
			st.body = make([]byte, size)
		}
		return
	}
	st.bn += n
	if st.bn < len(st.body) {
		return
	}
	f, err := api.DecodeFrameBody(st.body)
	st.hn, st.body, st.bn = 0, nil, 0
	if err != nil {
		st.endLocked(err)
		return
	}
	if len(st.pending) == 0 {
		select {
		case st.p.frames <- f:
			return
		default:
		}
	}
	st.pending = append(st.pending, f)
	st.pauseLocked()
}

// pauseLocked takes the pipe out of the set while drain delivers the
// frames kept (the poller's goroutine never waits on a channel).
func (st *frameStream) pauseLocked() {
	if st.paused {
		return
	}
	st.paused = true
	theFramePoller.drop(st.fd)
	go st.drain()
}

// endLocked ends the stream with err: at once, or, with frames kept, once
// drain has delivered them.
func (st *frameStream) endLocked(err error) {
	if len(st.pending) > 0 {
		st.endErr = err
		st.pauseLocked()
		return
	}
	st.finishLocked(err)
}

// finishLocked records why control-out ended, closes p.frames and the read
// end.
func (st *frameStream) finishLocked(err error) {
	st.p.readErr = err
	close(st.p.frames)
	st.closeLocked()
}

func (st *frameStream) closeLocked() {
	if st.closed {
		return
	}
	st.closed = true
	if !st.paused {
		theFramePoller.drop(st.fd)
	}
	unix.Close(st.fd)
}

// drain delivers the frames kept, then puts the pipe back in the set, or
// ends the stream if it ended meanwhile. It stops at release.
func (st *frameStream) drain() {
	for {
		st.mu.Lock()
		if st.closed {
			st.mu.Unlock()
			return
		}
		if len(st.pending) == 0 {
			defer st.mu.Unlock()
			if st.endErr != nil {
				st.finishLocked(st.endErr)
				return
			}
			st.paused = false
			if err := theFramePoller.add(st.fd, st); err != nil {
				st.paused = true // out of the set: closeLocked must not drop it
				st.finishLocked(err)
			}
			return
		}
		f := st.pending[0]
		st.mu.Unlock()
		select {
		case st.p.frames <- f:
		case <-st.p.stop:
			return
		}
		st.mu.Lock()
		st.pending[0] = nil
		st.pending = st.pending[1:]
		if len(st.pending) == 0 {
			st.pending = nil
		}
		st.mu.Unlock()
	}
}

// close closes the read end (release): no frame is read or delivered after
// it.
func (st *frameStream) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closeLocked()
}

// controlOutPipe is a child's control-out: the supervisor's read end
// non-blocking, for theFramePoller, and the child's write end for the fork.
func controlOutPipe() (ours, theirs int, err error) { return logPipe() }
