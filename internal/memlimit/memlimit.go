// Package memlimit finds the memory limit the process runs under: the
// memory.max of its cgroup (cgroup v2), else the memory.limit_in_bytes of its
// memory cgroup (cgroup v1), else the machine's MemTotal. The service's
// admission bounds are derived from it (package admit).
//
// The cgroup is the process's own, from /proc/self/cgroup, found under the
// mount that /proc/self/mountinfo names for its hierarchy. A limit set on an
// ancestor cgroup binds too, so the reader walks from the process's cgroup up
// to the mount's root and keeps the smallest limit; the result is never above
// MemTotal. A cgroup v2 "max", or a cgroup v1 value of 2^62 or more (the
// kernel's page-aligned LONG_MAX), means no limit at that level.
package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Source says where a limit came from.
type Source string

// Sources of a Limit.
const (
	SourceCgroup2 Source = "cgroup2" // memory.max of a cgroup v2 cgroup
	SourceCgroup1 Source = "cgroup1" // memory.limit_in_bytes of a cgroup v1 memory cgroup
	SourceMachine Source = "machine" // MemTotal in /proc/meminfo: no cgroup limit was found
)

// Limit is the memory limit the process found.
type Limit struct {
	Bytes   uint64 // the limit in force: the smallest of the cgroup limits and MemTotal
	Source  Source // where Bytes came from
	File    string // the file that set Bytes (under the reader's root)
	Machine uint64 // MemTotal
}

// String describes the limit for logs: "1.0 GiB from cgroup2 (/sys/fs/cgroup/memory.max)".
func (l Limit) String() string {
	return fmt.Sprintf("%.1f GiB from %s (%s)", float64(l.Bytes)/(1<<30), l.Source, l.File)
}

// unlimitedV1 is where a cgroup v1 limit stops being one: the kernel reports
// "no limit" as LONG_MAX rounded down to a page.
const unlimitedV1 = 1 << 62

// ErrNoMemTotal reports a /proc/meminfo without a MemTotal line.
var ErrNoMemTotal = errors.New("memlimit: no MemTotal in /proc/meminfo")

// Read finds the limit of the calling process. It is ReadFrom("/").
func Read() (Limit, error) { return ReadFrom("/") }

// ReadFrom finds the limit as the files under root describe it: root is "/"
// for the process itself, a fixture directory in tests (holding
// proc/self/cgroup, proc/self/mountinfo, proc/meminfo and the cgroup files at
// the mount points mountinfo names). It fails only when MemTotal cannot be
// read; a cgroup file that is missing or unreadable is no limit.
func ReadFrom(root string) (Limit, error) {
	total, err := memTotal(filepath.Join(root, "proc", "meminfo"))
	if err != nil {
		return Limit{}, err
	}
	best := Limit{Bytes: total, Source: SourceMachine, File: "/proc/meminfo", Machine: total}
	groups := readCgroups(filepath.Join(root, "proc", "self", "cgroup"))
	mounts := readMounts(filepath.Join(root, "proc", "self", "mountinfo"))
	consider := func(src Source, dir, mountPoint, file string, parse func(string) (uint64, bool)) {
		for d := dir; ; d = path.Dir(d) {
			rel := path.Join(d, file)
			if b, err := os.ReadFile(filepath.Join(root, rel)); err == nil {
				if v, ok := parse(strings.TrimSpace(string(b))); ok && v < best.Bytes {
					best = Limit{Bytes: v, Source: src, File: rel, Machine: total}
				}
			}
			if d == mountPoint || d == "/" || d == "." {
				return
			}
		}
	}
	if g, ok := groups["v2"]; ok {
		for _, m := range mounts {
			if m.fsType == "cgroup2" {
				consider(SourceCgroup2, m.dirOf(g), m.point, "memory.max", parseV2)
			}
		}
		if len(mounts) == 0 {
			consider(SourceCgroup2, path.Join("/sys/fs/cgroup", g), "/sys/fs/cgroup", "memory.max", parseV2)
		}
	}
	if g, ok := groups["memory"]; ok {
		for _, m := range mounts {
			if m.fsType == "cgroup" && m.hasOption("memory") {
				consider(SourceCgroup1, m.dirOf(g), m.point, "memory.limit_in_bytes", parseV1)
			}
		}
		if len(mounts) == 0 {
			consider(SourceCgroup1, path.Join("/sys/fs/cgroup/memory", g), "/sys/fs/cgroup/memory", "memory.limit_in_bytes", parseV1)
		}
	}
	return best, nil
}

func parseV2(s string) (uint64, bool) {
	if s == "max" {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil && v > 0
}

func parseV1(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil && v > 0 && v < unlimitedV1
}

// memTotal reads MemTotal (kB) from a meminfo file, in bytes.
func memTotal(file string) (uint64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, fmt.Errorf("memlimit: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			break
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil || kb == 0 {
			return 0, fmt.Errorf("memlimit: MemTotal %q: not a size", rest)
		}
		return kb << 10, nil
	}
	return 0, ErrNoMemTotal
}

// readCgroups parses /proc/self/cgroup: "v2" for the unified hierarchy (the
// "0::PATH" line), and each cgroup v1 controller by name.
func readCgroups(file string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(file)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out["v2"] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				out[c] = parts[2]
			}
		}
	}
	return out
}

// mount is one cgroup mount from mountinfo.
type mount struct {
	root    string // the cgroup path the mount shows at its point
	point   string // where it is mounted
	fsType  string
	options string // super options: the v1 controllers
}

// dirOf returns the directory of cgroup g under the mount. A process whose
// cgroup lies outside what the mount shows (another cgroup namespace) is
// looked for at the mount point.
func (m mount) dirOf(g string) string {
	if m.root == "/" {
		return path.Join(m.point, g)
	}
	if rel, ok := strings.CutPrefix(g, m.root); ok && (rel == "" || rel[0] == '/') {
		return path.Join(m.point, rel)
	}
	return m.point
}

func (m mount) hasOption(opt string) bool {
	for _, o := range strings.Split(m.options, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// readMounts returns the cgroup and cgroup2 mounts of a mountinfo file:
// "ID PARENT MAJ:MIN ROOT POINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS".
func readMounts(file string) []mount {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []mount
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, p := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(p) < 1 || (p[0] != "cgroup" && p[0] != "cgroup2") {
			continue
		}
		m := mount{root: unescape(f[3]), point: unescape(f[4]), fsType: p[0]}
		if len(p) >= 3 {
			m.options = p[2]
		}
		out = append(out, m)
	}
	return out
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
