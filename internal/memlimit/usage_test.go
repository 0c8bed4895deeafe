package memlimit

import (
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCgroupUsage: the working set of the cgroup whose limit binds, v2 and
// v1, is its usage less its inactive file cache; a limit from the machine has
// no cgroup to read.
func TestCgroupUsage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  uint64
	}{
		{
			name: "cgroup v2",
			files: map[string]string{
				"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/pod\n", "proc/self/mountinfo": mountsV2,
				"sys/fs/cgroup/pod/memory.max":     "1073741824\n",
				"sys/fs/cgroup/pod/memory.current": "314572800\n",
				"sys/fs/cgroup/pod/memory.stat":    "anon 200000000\nfile 100000000\nactive_file 40000000\ninactive_file 52428800\n",
			},
			want: 300*mib - 50*mib,
		},
		{
			name: "cgroup v1 on a hybrid host",
			files: map[string]string{
				"proc/meminfo": meminfo16G, "proc/self/cgroup": "4:memory:/pod\n0::/\n", "proc/self/mountinfo": mountsHybrid,
				"sys/fs/cgroup/memory/pod/memory.limit_in_bytes": "1073741824\n",
				"sys/fs/cgroup/memory/pod/memory.usage_in_bytes": "209715200\n",
				"sys/fs/cgroup/memory/pod/memory.stat":           "cache 1000\ninactive_file 5\ntotal_inactive_file 10485760\n",
			},
			want: 200*mib - 10*mib,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tc.files)
			l, err := ReadFrom(root)
			if err != nil {
				t.Fatal(err)
			}
			read, ok := CgroupUsage(root, l)
			if !ok {
				t.Fatalf("no cgroup usage for %s", l)
			}
			got, err := read()
			if err != nil || got != tc.want {
				t.Fatalf("usage = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	root := t.TempDir()
	write(t, root, map[string]string{"proc/meminfo": meminfo16G})
	l, err := ReadFrom(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := CgroupUsage(root, l); ok {
		t.Fatal("a machine limit has a cgroup usage")
	}
}

// TestReaderChildren: a Reader lists a real child among the process's
// children and reads its memory, as the free function does.
func TestReaderChildren(t *testing.T) {
	cmd := sleepChild(t)
	var r Reader
	kids, err := r.Children()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kids, cmd.Process.Pid) {
		t.Fatalf("children %v lack the child %d", kids, cmd.Process.Pid)
	}
	if free, err := Children(); err != nil || !slices.Contains(free, cmd.Process.Pid) {
		t.Fatalf("Children() = %v, %v: the child %d is not among them", free, err, cmd.Process.Pid)
	}
	child, err := r.Rollup(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	self, err := r.Rollup(0)
	if err != nil {
		t.Fatal(err)
	}
	if child.PSS == 0 || child.RSS < child.PSS || self.RSS == 0 {
		t.Fatalf("child %+v, self %+v", child, self)
	}
}

// rollupByLines is parseRollup's specification, written plainly: a line
// counts when its name, before its first colon, is Rss, Pss,
// Private_Clean or Private_Dirty, and the first field after the colon
// (fields split at spaces and tabs) is a decimal that fits 64 bits.
func rollupByLines(s string) Rollup {
	var r Rollup
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.FieldsFunc(rest, func(c rune) bool { return c == ' ' || c == '\t' })
		if len(f) == 0 || strings.TrimLeft(rest, " \t")[:len(f[0])] != f[0] || strings.TrimLeft(f[0], "0123456789") != "" {
			continue
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "Rss":
			r.RSS = kb << 10
		case "Pss":
			r.PSS = kb << 10
		case "Private_Clean", "Private_Dirty":
			r.Private += kb << 10
		}
	}
	return r
}

const rollupSample = `55d7c9a00000-7ffc5a5f3000 ---p 00000000 00:00 0                          [rollup]
Rss:                2312 kB
Pss:                1021 kB
Pss_Dirty:           980 kB
Pss_Anon:            980 kB
Shared_Clean:       1312 kB
Private_Clean:         4 kB
Private_Dirty:       996 kB
Anonymous:           996 kB
`

// TestParseRollup: the fields of a smaps_rollup, the kernel's own and a
// sample, as rollupByLines reads them; Pss_Dirty and the like are not Pss.
func TestParseRollup(t *testing.T) {
	if got, want := parseRollup([]byte(rollupSample)), (Rollup{RSS: 2312 << 10, PSS: 1021 << 10, Private: 1000 << 10}); got != want {
		t.Fatalf("sample: %+v, want %+v", got, want)
	}
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		t.Skipf("no smaps_rollup: %v", err)
	}
	got, want := parseRollup(b), rollupByLines(string(b))
	if got != want || got.RSS == 0 || got.PSS == 0 {
		t.Fatalf("own smaps_rollup: %+v, want %+v", got, want)
	}
}

// FuzzParseRollup: parseRollup reads any bytes as its specification does.
func FuzzParseRollup(f *testing.F) {
	for _, s := range []string{rollupSample, "Rss: 12\nPss:\t7 kB\n", "Rss:18446744073709551616 kB\n", "Pss: 1x kB\nPss: 2\r\n", ":::\n\n Rss: 1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := parseRollup(b), rollupByLines(string(b)); got != want {
			t.Fatalf("parseRollup(%q) = %+v, want %+v", b, got, want)
		}
	})
}

// FuzzAppendPids: appendPids keeps each field that is a pid, in order.
func FuzzAppendPids(f *testing.F) {
	for _, s := range []string{"", "123 456 \n", "1\t2\n3", "0 -4 +5 2147483648 2147483647 x12 "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want []int
		for _, w := range strings.FieldsFunc(string(b), func(c rune) bool { return c == ' ' || c == '\t' || c == '\n' }) {
			if strings.TrimLeft(w, "0123456789") != "" {
				continue
			}
			if v, err := strconv.ParseUint(w, 10, 64); err == nil && v > 0 && v <= math.MaxInt32 {
				want = append(want, int(v))
			}
		}
		if got := appendPids(nil, b); !slices.Equal(got, want) {
			t.Fatalf("appendPids(%q) = %v, want %v", b, got, want)
		}
	})
}

// TestReaderAllocs: a Reader reads a child's smaps_rollup with one
// allocation, its path's copy for the system call (it was about 5 KB in a
// dozen allocations through os.ReadFile and a scanner); a pid with no
// process is an error that names it.
func TestReaderAllocs(t *testing.T) {
	cmd := sleepChild(t)
	var r Reader
	if _, err := r.Rollup(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if got, err := r.Rollup(cmd.Process.Pid); err != nil || got.PSS == 0 {
			t.Fatalf("rollup %+v, %v", got, err)
		}
	}); n > 1 {
		t.Fatalf("a read allocates %.0f times, want at most 1 (the C string of its path)", n)
	}
	if _, err := r.Rollup(1 << 30); err == nil || !strings.Contains(err.Error(), "process 1073741824") {
		t.Fatalf("a pid with no process: %v", err)
	}
}

// sleepChild starts a child that waits, killed and reaped at the test's end.
func sleepChild(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep binary to be a child: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}
