package supervisor

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A death by signal names the signal (the log read "killed by killed" when
// it used the signal's strsignal text).
func TestExitStatusString(t *testing.T) {
	for _, tc := range []struct {
		status unix.WaitStatus
		want   string
		code   int
	}{
		{0, "exit 0", 0},
		{3 << 8, "exit 3", 3},
		{unix.WaitStatus(unix.SIGKILL), "killed by SIGKILL", 137},
		{unix.WaitStatus(unix.SIGTERM), "killed by SIGTERM", 143},
		{unix.WaitStatus(unix.SIGSEGV) | 0x80, "killed by SIGSEGV", 139}, // core dumped
		{40, "killed by signal 40", 168},                                 // a real-time signal has no name
	} {
		e := ExitStatus{Pid: 1, Status: tc.status}
		if got := e.String(); got != tc.want {
			t.Errorf("status %#x: String() = %q, want %q", uint32(tc.status), got, tc.want)
		}
		if got := e.Code(); got != tc.code {
			t.Errorf("status %#x: Code() = %d, want %d", uint32(tc.status), got, tc.code)
		}
	}
}
