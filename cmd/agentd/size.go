package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the suffixes parseSize accepts, all binary (powers of 1024),
// longest first so "MiB" is tried before "B".
var sizeUnits = []struct {
	suffix string
	shift  uint
}{
	{"kib", 10}, {"mib", 20}, {"gib", 30}, {"tib", 40},
	{"k", 10}, {"m", 20}, {"g", 30}, {"t", 40},
	{"b", 0},
}

// parseSize parses a byte size: a non-negative integer with an optional binary
// unit (B, K/KiB, M/MiB, G/GiB, T/TiB, case-insensitive), such as 0, 4096,
// 512MiB or 2g.
func parseSize(s string) (uint64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	var shift uint
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, shift = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.shift
			break
		}
	}
	if t == "" || t[0] == '+' || t[0] == '-' {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (KiB, MiB, GiB, TiB)", s)
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (KiB, MiB, GiB, TiB)", s)
	}
	if n > math.MaxUint64>>shift {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n << shift, nil
}

// formatSize writes n in the largest binary unit that divides it exactly.
func formatSize(n uint64) string {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}}
	for _, u := range units {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatUint(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10)
}
