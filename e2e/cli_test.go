package e2e

import (
	"strings"
	"testing"
)

// --distillate-budget and --max-repeats hold for every subagent of a tree,
// not only the root: a child's 405-character answer is stored and reaches its
// parent as a reference with a summary at a budget of 200, and a child that
// repeats a call three times is not loop_detected at --max-repeats 4 (both
// were the defaults for children: the answer stayed inline, and the child
// stopped at the default of 3).
func TestChildrenHaveTheTreesLimits(t *testing.T) {
	long := strings.Repeat("0123456789", 40) + "abcde"
	script := writeScript(t, `[depth 0]
spawn sync "write it"
answer "root saw: {results}"
[depth 1]
call subagent.status {"handle":"h"}
call subagent.status {"handle":"h"}
call subagent.status {"handle":"h"}
answer "`+long+`"
`)
	stdout, stderr, code := runOnceEnv(t, nil, "--state-dir", t.TempDir(), "--intelligence", "builtin:script="+script,
		"--distillate-budget", "200", "--max-repeats", "4", "--instruction", "go")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if strings.Contains(stdout, long) || !strings.Contains(stdout, "of 405 characters") {
		t.Fatalf("the child's answer did not reach the root as a stored reference:\n%s", stdout)
	}
}

// `ctl a2a.Caps` prints each cap and the admission lines, and no empty
// field (it printed "admission: <nil>").
func TestCtlCapsPrintsNoNil(t *testing.T) {
	s := startService(t)
	out, code := runCombined(t, "ctl", "a2a.Caps", "--to", s.url)
	if code != 0 || strings.Contains(out, "<nil>") || !strings.Contains(out, "max_depth: ") || !strings.Contains(out, "admission: runs ") {
		t.Fatalf("ctl a2a.Caps: exit %d\n%s", code, out)
	}
}
