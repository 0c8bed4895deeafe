package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// maxInitAlloc bounds the heap one agentd package allocates in its init.
// Every subagent is this binary re-exec'd, so what an init builds (a compiled
// regexp, a table) is paid, and kept, by every child that never uses it.
const maxInitAlloc = 8 << 10

// No agentd package builds more than maxInitAlloc at init, the generated
// gRPC binding (a2apb, which registers its descriptors on first use, about 50
// KB) included: this test binary, which links them all, is run
// with GODEBUG=inittrace=1 and its trace read. A package-level regexp such
// as agentsfile's name pattern (52 KB) or cli's flag error matcher (19 KB)
// fails it; compile such a thing on first use.
func TestPackageInitsAllocateLittle(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	seen := 0
	for _, line := range strings.Split(string(out), "\n") {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(line)
		if len(f) < 10 || f[0] != "init" || !strings.HasPrefix(f[1], "github.com/agentd/agentd/") {
			continue
		}
		seen++
		b, err := strconv.Atoi(f[7])
		if err != nil || f[8] != "bytes," {
			t.Fatalf("unreadable trace line %q", line)
		}
		if b > maxInitAlloc {
			t.Errorf("package %s allocates %d bytes at init (at most %d): every subagent pays it", f[1], b, maxInitAlloc)
		}
	}
	if seen == 0 {
		t.Fatalf("no init trace of an agentd package:\n%.2000s", out)
	}
}
