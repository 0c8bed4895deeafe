package memlimit

import (
	"os/exec"
	"slices"
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

// TestTreeUsage: the tree's usage counts a real child's PSS beside the
// process's own RSS.
func TestTreeUsage(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep binary to be a child: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	kids, err := Children()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kids, cmd.Process.Pid) {
		t.Fatalf("children %v lack the child %d", kids, cmd.Process.Pid)
	}
	child, err := ReadRollup(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	total, self, err := TreeUsage()
	if err != nil {
		t.Fatal(err)
	}
	if child.PSS == 0 || self == 0 || total < self+child.PSS/2 {
		t.Fatalf("total %d, self %d, child's PSS %d: the child is not counted", total, self, child.PSS)
	}
}
