package memlimit

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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

// A Reader reads /proc's memory files into a buffer it keeps, so that a
// sampler that reads every child several times a second makes next to no
// garbage: a read of a child's smaps_rollup costs its path, where
// os.ReadFile and a line scanner cost about 5 KB (an os.File, the file's
// bytes, the scanner's buffer, each line's fields). The supervisor's memory
// watch reads every live child every 250 ms: with 50 children waiting on
// their models that was 3.3 MB a second, most of what the supervisor
// allocated while they waited, and with it the collections and the heap
// pages they kept resident (docs/performance.md, figure 9). A Reader is not
// safe for concurrent use; its zero value is ready.
type Reader struct {
	buf  []byte
	kids []int
}

// ReadRollup reads /proc/PID/smaps_rollup (pid 0: the calling process).
func ReadRollup(pid int) (Rollup, error) {
	var r Reader
	return r.Rollup(pid)
}

// Rollup reads /proc/PID/smaps_rollup (pid 0: the calling process).
func (r *Reader) Rollup(pid int) (Rollup, error) {
	var pb [40]byte // the path, built where it costs no allocation
	path := append(pb[:0], "/proc/self"...)
	if pid > 0 {
		path = strconv.AppendInt(path[:len("/proc/")], int64(pid), 10)
	}
	path = append(path, "/smaps_rollup"...)
	b, err := r.read(string(path))
	if err != nil {
		who := "self"
		if pid > 0 {
			who = strconv.Itoa(pid)
		}
		return Rollup{}, fmt.Errorf("memlimit: read the memory of process %s: %w", who, err)
	}
	return parseRollup(b), nil
}

// read reads the whole of file into r.buf and returns it; the bytes are
// the Reader's until its next read.
func (r *Reader) read(file string) ([]byte, error) {
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: strings.Clone(file), Err: err} // a copy: file may be a caller's stack bytes
	}
	defer unix.Close(fd)
	if r.buf == nil {
		r.buf = make([]byte, 0, 4096) // a smaps_rollup is about 1 KiB
	}
	b := r.buf[:0]
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, cap(b))
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			r.buf = b
			return nil, &os.PathError{Op: "read", Path: strings.Clone(file), Err: err}
		case n == 0:
			r.buf = b
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// parseRollup reads the fields of a smaps_rollup ("Name:   123 kB" lines);
// it allocates nothing. A line it cannot read counts nothing.
func parseRollup(b []byte) Rollup {
	var r Rollup
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		name, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		kb, ok := leadingUint(rest)
		if !ok {
			continue
		}
		switch string(name) { // compared without a copy
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

// leadingUint is the unsigned decimal of the first field of b (fields
// are separated by spaces and tabs); it reports false if that field is not
// one, or it overflows.
func leadingUint(b []byte) (uint64, bool) {
	f, _ := nextField(b, " \t")
	return decimal(f)
}

// nextField is the first run of b that holds none of the bytes of sep, after
// any of them, and what follows it.
func nextField(b []byte, sep string) (field, rest []byte) {
	b = bytes.TrimLeft(b, sep)
	n := bytes.IndexAny(b, sep)
	if n < 0 {
		return b, nil
	}
	return b[:n], b[n:]
}

// decimal reads f, all of it, as an unsigned decimal.
func decimal(f []byte) (uint64, bool) {
	if len(f) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range f {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// Children returns the pids of the calling process's children, from each of
// its threads' /proc/self/task/TID/children.
func Children() ([]int, error) {
	var r Reader
	return r.Children()
}

// Children returns the pids of the calling process's children, from each of
// its threads' /proc/self/task/TID/children. The slice is the Reader's
// until its next call of Children.
func (r *Reader) Children() ([]int, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("memlimit: list the threads: %w", err)
	}
	out := r.kids[:0]
	for _, t := range tasks {
		b, err := r.read("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue // the thread ended
		}
		out = appendPids(out, b)
	}
	r.kids = out
	return out, nil
}

// appendPids appends the pids of a children file (decimal pids separated
// by spaces) to out; a field that is not a pid is skipped.
func appendPids(out []int, b []byte) []int {
	for {
		var f []byte
		if f, b = nextField(b, " \t\n"); len(f) == 0 {
			return out
		}
		if v, ok := decimal(f); ok && v > 0 && v <= math.MaxInt32 {
			out = append(out, int(v))
		}
	}
}
