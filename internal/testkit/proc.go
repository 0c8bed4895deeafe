package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Children returns the pids of pid's direct children. /proc lists children
// per thread, and agentd forks from one dedicated thread, so every thread is
// read.
func Children(pid int) []int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// state returns the state letter of a /proc/.../stat file's content ('R',
// 'S', 'T', 'Z'...), or 0 if there is none. The state follows the
// parenthesized command name, which may itself hold parentheses.
func state(stat []byte) byte {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// Alive reports whether pid is a live process: it exists and is not a
// zombie.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	return state(b) != 'Z'
}

// Stopped reports whether every thread of pid is stopped (state T).
func Stopped(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil || state(b) != 'T' {
			return false
		}
	}
	return true
}

// GroupGone reports whether process group pgid has no member at all, not
// even a zombie: kill(-pgid, 0) fails with ESRCH. A process's own children
// are gone once it reaped them.
func GroupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// GroupDead reports whether no live process is left in process group pgid:
// zombies may remain, for whoever inherited them to reap (a test that is
// not their parent cannot).
func GroupDead(pgid int) bool {
	if GroupGone(pgid) {
		return true
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err == nil && g == pgid && Alive(pid) {
			return false
		}
	}
	return true
}

// GroupWait bounds WaitGroupGone.
const GroupWait = 10 * time.Second

// WaitGroupGone polls until process group pgid is gone (GroupGone), and
// marks the test failed (t.Errorf, so it may run in a cleanup and the
// cleanup goes on) if it is not within GroupWait.
func WaitGroupGone(t testing.TB, pgid int) {
	t.Helper()
	if !Poll(GroupWait, func() bool { return GroupGone(pgid) }) {
		t.Errorf("process group %d still exists after %s: kill(-pgid, 0) = %v", pgid, GroupWait, syscall.Kill(-pgid, 0))
	}
}
