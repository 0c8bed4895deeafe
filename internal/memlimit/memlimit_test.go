package memlimit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const (
	meminfo16G = "MemTotal:       16777216 kB\nMemFree:         1000000 kB\n"
	gib        = 1 << 30
	mib        = 1 << 20
)

// Mount tables as a container and a host show them.
const (
	mountsV2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
	mountsV1 = "31 23 0:28 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
	// A v1 host with the unified hierarchy mounted beside it (no memory
	// controller there: it is bound to v1).
	mountsHybrid = mountsV1 + "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadFrom(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		bytes  uint64
		source Source
		file   string
	}{
		{
			name: "cgroup v2, namespaced: the pod's 1 GiB",
			files: map[string]string{
				"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/\n", "proc/self/mountinfo": mountsV2,
				"sys/fs/cgroup/memory.max": "1073741824\n",
			},
			bytes: gib, source: SourceCgroup2, file: "/sys/fs/cgroup/memory.max",
		},
		{
			name: "cgroup v2 max means no limit: the machine",
			files: map[string]string{
				"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/\n", "proc/self/mountinfo": mountsV2,
				"sys/fs/cgroup/memory.max": "max\n",
			},
			bytes: 16 * gib, source: SourceMachine, file: "/proc/meminfo",
		},
		{
			name: "cgroup v2: a container at max under a pod limit takes the pod's",
			files: map[string]string{
				"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/kubepods/pod1/ctr\n", "proc/self/mountinfo": mountsV2,
				"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max\n",
				"sys/fs/cgroup/kubepods/pod1/memory.max":     "536870912\n",
				"sys/fs/cgroup/kubepods/memory.max":          "8589934592\n",
			},
			bytes: 512 * mib, source: SourceCgroup2, file: "/sys/fs/cgroup/kubepods/pod1/memory.max",
		},
		{
			name: "cgroup v2: a limit above MemTotal is the machine's",
			files: map[string]string{
				"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/\n", "proc/self/mountinfo": mountsV2,
				"sys/fs/cgroup/memory.max": "68719476736\n",
			},
			bytes: 16 * gib, source: SourceMachine, file: "/proc/meminfo",
		},
		{
			name: "cgroup v2 without mountinfo: the standard mount point",
			files: map[string]string{
				"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/\n",
				"sys/fs/cgroup/memory.max": "2147483648",
			},
			bytes: 2 * gib, source: SourceCgroup2, file: "/sys/fs/cgroup/memory.max",
		},
		{
			name: "cgroup v1: the memory controller's limit",
			files: map[string]string{
				"proc/meminfo":        meminfo16G,
				"proc/self/cgroup":    "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n",
				"proc/self/mountinfo": mountsV1,
				"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes":            "9223372036854771712\n",
			},
			bytes: gib, source: SourceCgroup1, file: "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
		},
		{
			name: "cgroup v1: a mount that shows only the container's cgroup",
			files: map[string]string{
				"proc/meminfo":        meminfo16G,
				"proc/self/cgroup":    "4:memory:/kubepods/pod1/ctr\n",
				"proc/self/mountinfo": "35 31 0:32 /kubepods/pod1/ctr /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "805306368\n",
			},
			bytes: 768 * mib, source: SourceCgroup1, file: "/sys/fs/cgroup/memory/memory.limit_in_bytes",
		},
		{
			name: "cgroup v1 unlimited (page-aligned LONG_MAX): the machine",
			files: map[string]string{
				"proc/meminfo": meminfo16G, "proc/self/cgroup": "4:memory:/x\n", "proc/self/mountinfo": mountsV1,
				"sys/fs/cgroup/memory/x/memory.limit_in_bytes": "9223372036854771712\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes":   "9223372036854771712\n",
			},
			bytes: 16 * gib, source: SourceMachine, file: "/proc/meminfo",
		},
		{
			name: "hybrid: v2 unified without memory.max, the v1 limit binds",
			files: map[string]string{
				"proc/meminfo":                                     meminfo16G,
				"proc/self/cgroup":                                 "4:memory:/job/7\n0::/\n",
				"proc/self/mountinfo":                              mountsHybrid,
				"sys/fs/cgroup/unified/cgroup.procs":               "1\n",
				"sys/fs/cgroup/memory/job/7/memory.limit_in_bytes": "3221225472\n",
			},
			bytes: 3 * gib, source: SourceCgroup1, file: "/sys/fs/cgroup/memory/job/7/memory.limit_in_bytes",
		},
		{
			name:  "no cgroup at all: the machine",
			files: map[string]string{"proc/meminfo": meminfo16G},
			bytes: 16 * gib, source: SourceMachine, file: "/proc/meminfo",
		},
		{
			name: "garbage in a cgroup file is no limit",
			files: map[string]string{
				"proc/meminfo": meminfo16G, "proc/self/cgroup": "0::/\n", "proc/self/mountinfo": mountsV2,
				"sys/fs/cgroup/memory.max": "lots\n",
			},
			bytes: 16 * gib, source: SourceMachine, file: "/proc/meminfo",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, tc.files)
			got, err := ReadFrom(root)
			if err != nil {
				t.Fatal(err)
			}
			want := Limit{Bytes: tc.bytes, Source: tc.source, File: tc.file, Machine: 16 * gib}
			if got != want {
				t.Errorf("ReadFrom = %+v, want %+v", got, want)
			}
		})
	}
}

func TestReadFromNoMeminfo(t *testing.T) {
	root := t.TempDir()
	if _, err := ReadFrom(root); err == nil {
		t.Fatal("no error without /proc/meminfo")
	}
	write(t, root, map[string]string{"proc/meminfo": "MemFree: 1 kB\n"})
	if _, err := ReadFrom(root); !errors.Is(err, ErrNoMemTotal) {
		t.Fatalf("err = %v, want ErrNoMemTotal", err)
	}
}

// The process's own limit is readable here and never above the machine.
func TestRead(t *testing.T) {
	l, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if l.Bytes == 0 || l.Bytes > l.Machine {
		t.Fatalf("Read = %+v", l)
	}
	t.Logf("this process: %s", l)
}

func TestUnescape(t *testing.T) {
	if got := unescape(`/mnt/a\040b\134c`); got != `/mnt/a b\c` {
		t.Fatalf("unescape = %q", got)
	}
	if got := unescape(`/x\04`); got != `/x\04` {
		t.Fatalf("unescape of a short escape = %q", got)
	}
}
