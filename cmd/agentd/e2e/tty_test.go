package e2e

import (
	"fmt"
	"os"
	"regexp"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// regexpChildText matches a child's line forwarded by the supervisor and
// rendered as text: the child logs JSON, the supervisor re-renders it.
var regexpChildText = regexp.MustCompile(`(?m)^time=\S+ level=INFO msg="subagent finished" .*child=true`)

// openPTY opens a pseudo-terminal pair: what is written to tty reads back
// from pty. Both are closed at cleanup.
func openPTY(t *testing.T) (pty, tty *os.File) {
	t.Helper()
	// Non-blocking, so the runtime's poller serves it and read deadlines
	// work.
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	m := os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlock the pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open the tty: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}
