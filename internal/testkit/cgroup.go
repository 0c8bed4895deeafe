package testkit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MemoryCgroup is a memory cgroup made under the calling process's own: a
// real memory controller holding what its processes charge to the limit it
// was given. Tests and the bench run a service in one (Wrap) to hold it to
// a pod's limit as the kernel would.
type MemoryCgroup struct {
	Dir string // the cgroup's directory
	V1  bool   // cgroup v1's memory hierarchy; else cgroup v2
}

// MakeMemoryCgroup makes a memory cgroup limited to limit bytes, named
// after this process and the time. It fails where the machine has no memory
// controller this process may write (it needs root, or a delegated cgroup
// v2 subtree with the memory controller); callers skip then.
func MakeMemoryCgroup(limit uint64) (*MemoryCgroup, error) {
	parent, v1, err := ownMemoryCgroup()
	if err != nil {
		return nil, fmt.Errorf("testkit: no memory cgroup to nest one in: %w", err)
	}
	dir := filepath.Join(parent, fmt.Sprintf("agentd-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("testkit: make a memory cgroup under %s: %w", parent, err)
	}
	cg := &MemoryCgroup{Dir: dir, V1: v1}
	file := "memory.max"
	if v1 {
		file = "memory.limit_in_bytes"
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatUint(limit, 10)), 0o644); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("testkit: set %s of a memory cgroup: %w", file, err)
	}
	return cg, nil
}

// ownMemoryCgroup finds the directory of this process's memory cgroup:
// cgroup v1's memory hierarchy where one is mounted, else the unified
// hierarchy when it gives its children the memory controller.
func ownMemoryCgroup() (dir string, v1 bool, err error) {
	paths := map[string]string{} // a hierarchy's controller ("" for v2) -> this process's cgroup in it
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			paths[c] = f[2]
		}
	}
	mounts, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	defer mounts.Close()
	var v2Dir string
	sc := bufio.NewScanner(mounts)
	for sc.Scan() {
		// id parent dev root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		root, point := strings.TrimSuffix(f[3], "/"), f[4]
		switch g[0] {
		case "cgroup":
			p, ok := paths["memory"]
			if !ok || !hasOption(g[2], "memory") {
				continue
			}
			if rel, ok := strings.CutPrefix(p, root); ok {
				return filepath.Join(point, rel), true, nil
			}
		case "cgroup2":
			if rel, ok := strings.CutPrefix(paths[""], root); ok {
				v2Dir = filepath.Join(point, rel)
			}
		}
	}
	if v2Dir == "" {
		return "", false, errors.New("neither cgroup v1's memory hierarchy nor cgroup v2 is mounted")
	}
	ctl, err := os.ReadFile(filepath.Join(v2Dir, "cgroup.subtree_control"))
	if err != nil || !hasOption(strings.Join(strings.Fields(string(ctl)), ","), "memory") {
		return "", false, fmt.Errorf("cgroup v2 at %s does not give its children the memory controller", v2Dir)
	}
	return v2Dir, false, nil
}

func hasOption(list, want string) bool {
	for _, o := range strings.Split(list, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// Wrap writes, in dir, a start-up script that joins the cgroup and then
// execs bin with its arguments: a service started through it is in the
// cgroup from its first instruction, and so is every child it starts.
func (cg *MemoryCgroup) Wrap(dir, bin string) (string, error) {
	script := filepath.Join(dir, "in-cgroup")
	body := fmt.Sprintf("#!/bin/sh\necho $$ > '%s' || exit 97\nexec '%s' \"$@\"\n", filepath.Join(cg.Dir, "cgroup.procs"), bin)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		return "", fmt.Errorf("testkit: write the cgroup's start-up script: %w", err)
	}
	return script, nil
}

// OOMKills is how many processes the kernel's OOM killer ended in the
// cgroup.
func (cg *MemoryCgroup) OOMKills() uint64 {
	if cg.V1 {
		return cg.key("memory.oom_control", "oom_kill")
	}
	return cg.key("memory.events", "oom_kill")
}

// AtLimit is how many times the cgroup's charge reached its limit (the
// kernel had to reclaim, or would have killed, to go on).
func (cg *MemoryCgroup) AtLimit() uint64 {
	if cg.V1 {
		return cg.number("memory.failcnt")
	}
	return cg.key("memory.events", "max")
}

// Peak is the most the cgroup held, in bytes.
func (cg *MemoryCgroup) Peak() uint64 {
	if cg.V1 {
		return cg.number("memory.max_usage_in_bytes")
	}
	return cg.number("memory.peak")
}

// WorkingSet is what the cgroup holds less its inactive file cache (which
// the kernel reclaims first), in bytes: what Kubernetes and agentd's memory
// gate count.
func (cg *MemoryCgroup) WorkingSet() uint64 {
	usage, inactive := cg.number("memory.current"), cg.key("memory.stat", "inactive_file")
	if cg.V1 {
		usage, inactive = cg.number("memory.usage_in_bytes"), cg.key("memory.stat", "total_inactive_file")
	}
	if inactive > usage {
		return 0
	}
	return usage - inactive
}

// Breakdown is what the cgroup's charge is made of, in bytes: anonymous
// memory, page cache, and the kernel's own (page tables, kernel stacks,
// slab; cgroup v1's kmem counter, v2's "kernel" or its parts).
func (cg *MemoryCgroup) Breakdown() (anon, file, kernel uint64) {
	if cg.V1 {
		return cg.key("memory.stat", "rss"), cg.key("memory.stat", "cache"), cg.number("memory.kmem.usage_in_bytes")
	}
	kernel = cg.key("memory.stat", "kernel")
	if kernel == 0 {
		kernel = cg.key("memory.stat", "kernel_stack") + cg.key("memory.stat", "pagetables") + cg.key("memory.stat", "slab")
	}
	return cg.key("memory.stat", "anon"), cg.key("memory.stat", "file"), kernel
}

// key reads one key of a flat keyed file of the cgroup ("oom_kill 0").
func (cg *MemoryCgroup) key(file, key string) uint64 {
	b, err := os.ReadFile(filepath.Join(cg.Dir, file))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// number reads a one-number file of the cgroup.
func (cg *MemoryCgroup) number(file string) uint64 {
	b, err := os.ReadFile(filepath.Join(cg.Dir, file))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// Remove waits up to wait for the cgroup to hold no process (its service
// stopped and reaped its children) and removes it.
func (cg *MemoryCgroup) Remove(wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		b, err := os.ReadFile(filepath.Join(cg.Dir, "cgroup.procs"))
		if err != nil || strings.TrimSpace(string(b)) == "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testkit: memory cgroup %s still holds processes %v", cg.Dir, strings.Fields(string(b)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.Remove(cg.Dir); err != nil {
		return fmt.Errorf("testkit: remove the memory cgroup: %w", err)
	}
	return nil
}
