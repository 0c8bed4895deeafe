package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// The memory in use, as admission watches it: the working set of the cgroup
// whose limit binds (its usage less its inactive file cache, which the kernel
// reclaims before it kills anything), or, without a cgroup limit, the
// process tree's own: the supervisor's RSS plus each child's PSS from
// /proc/PID/smaps_rollup.

// CgroupUsage returns a reader of the working set of the cgroup that set l
// (cgroup v2: memory.current less memory.stat's inactive_file; cgroup v1:
// memory.usage_in_bytes less total_inactive_file), for files under root ("/"
// for the process itself). It reports false when l did not come from a
// cgroup.
func CgroupUsage(root string, l Limit) (func() (uint64, error), bool) {
	var usage, stat, inactive string
	switch l.Source {
	case SourceCgroup2:
		usage, stat, inactive = "memory.current", "memory.stat", "inactive_file"
	case SourceCgroup1:
		usage, stat, inactive = "memory.usage_in_bytes", "memory.stat", "total_inactive_file"
	default:
		return nil, false
	}
	dir := filepath.Join(root, path.Dir(l.File))
	return func() (uint64, error) {
		b, err := os.ReadFile(filepath.Join(dir, usage))
		if err != nil {
			return 0, fmt.Errorf("memlimit: read the cgroup's usage: %w", err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("memlimit: %s: %w", usage, err)
		}
		if in, ok := statField(filepath.Join(dir, stat), inactive); ok && in < v {
			v -= in
		}
		return v, nil
	}, true
}

// statField reads one "NAME VALUE" line of a memory.stat file.
func statField(file, name string) (uint64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && k == name {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// Rollup is what /proc/PID/smaps_rollup says of a process, in bytes.
type Rollup struct {
	RSS, PSS, Private uint64
}

// ReadRollup reads /proc/PID/smaps_rollup (pid 0: the calling process).
func ReadRollup(pid int) (Rollup, error) {
	p := "self"
	if pid > 0 {
		p = strconv.Itoa(pid)
	}
	b, err := os.ReadFile("/proc/" + p + "/smaps_rollup")
	if err != nil {
		return Rollup{}, fmt.Errorf("memlimit: read the memory of process %s: %w", p, err)
	}
	return parseRollup(b), nil
}

func parseRollup(b []byte) Rollup {
	var r Rollup
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "Rss:":
			r.RSS = kb << 10
		case "Pss:":
			r.PSS = kb << 10
		case "Private_Clean:", "Private_Dirty:":
			r.Private += kb << 10
		}
	}
	return r
}

// Children returns the pids of the calling process's children, from each of
// its threads' /proc/self/task/TID/children.
func Children() ([]int, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("memlimit: list the threads: %w", err)
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue // the thread ended
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out, nil
}

// TreeUsage is the process tree's memory in use: the calling process's RSS
// plus each of its children's PSS (a child that ended meanwhile counts 0).
// It returns the total and the calling process's RSS.
func TreeUsage() (total, self uint64, err error) {
	me, err := ReadRollup(0)
	if err != nil {
		return 0, 0, err
	}
	kids, err := Children()
	if err != nil {
		return 0, 0, err
	}
	total = me.RSS
	for _, pid := range kids {
		if r, err := ReadRollup(pid); err == nil {
			total += r.PSS
		}
	}
	return total, me.RSS, nil
}
