package testkit

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

// LeakOptions are the goleak options of every package's leak check
// (goleak.VerifyTestMain or goleak.Find in its TestMain): the goroutines that
// live as long as the process by design, and only those, are ignored.
//
// The supervisor's reaper starts them once per process, at the first
// supervisor.New, and never stops them: the single owner of wait4(-1), woken
// by SIGCHLD, and the forker goroutine, locked to its OS thread, whose thread
// is the parent of every child (a child's PR_SET_PDEATHSIG fires when that
// thread exits, so it must never exit). See supervisor/reaper.go.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/agentd/agentd/supervisor.(*reaper).reapOnSIGCHLD"),
		goleak.IgnoreTopFunction("github.com/agentd/agentd/supervisor.(*reaper).forker"),
	}
}

// LeakCheck is goleak.VerifyTestMain for a TestMain with more to do after
// m.Run: given m.Run's exit code, it returns 1 if the tests passed but left
// goroutines behind (written to stderr), and code otherwise.
func LeakCheck(code int) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(LeakOptions()...); err != nil {
		fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
		return 1
	}
	return code
}
