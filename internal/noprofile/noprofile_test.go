package noprofile

import (
	"os"
	"runtime"
	"testing"
)

// TestRateOff: a process that imports the package samples no heap profile
// (the test binary's environment sets neither GODEBUG's memprofilerate nor
// EnvMemDump; `go test` sets the rate only for -memprofile).
func TestRateOff(t *testing.T) {
	if keep(os.Getenv("GODEBUG"), os.Getenv(EnvMemDump)) {
		t.Skip("GODEBUG or EnvMemDump keeps the rate in this environment")
	}
	if runtime.MemProfileRate != 0 {
		t.Fatalf("runtime.MemProfileRate %d after init, want 0", runtime.MemProfileRate)
	}
}

func TestKeep(t *testing.T) {
	for _, c := range []struct {
		godebug, memdump string
		want             bool
	}{
		{"", "", false},
		{"madvdontneed=1", "", false},
		{"memprofilerate=1", "", true},
		{"gctrace=1, memprofilerate=0", "", true},
		{"profstackdepth=0", "all:/tmp/dump", true},
		{"", "/tmp/dump", true},
		{"xmemprofilerate=1", "", false},
	} {
		if got := keep(c.godebug, c.memdump); got != c.want {
			t.Errorf("keep(%q, %q) = %v, want %v", c.godebug, c.memdump, got, c.want)
		}
	}
}
