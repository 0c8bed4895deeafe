package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"4096", 4096, true},
		{"512MiB", 512 << 20, true},
		{"2GiB", 2 << 30, true},
		{"2g", 2 << 30, true},
		{"1 TiB", 1 << 40, true},
		{"64k", 64 << 10, true},
		{"100B", 100, true},
		{"", 0, false},
		{"GiB", 0, false},
		{"-1GiB", 0, false},
		{"+1GiB", 0, false},
		{"1.5GiB", 0, false},
		{"1GB", 0, false},
		{"lots", 0, false},
		{"16777216TiB", 0, false}, // 2^64 bytes
		{"18446744073709551616", 0, false},
	} {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// FuzzParseSize: the parser never panics, and what it accepts survives a round
// trip through formatSize.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4096", "512MiB", "2g", "1 TiB", "-1", "1GB", "16777216TiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			return
		}
		m, err := parseSize(formatSize(n))
		if err != nil || m != n {
			t.Fatalf("parseSize(%q) = %d, but formatSize gives %q -> %d, %v", s, n, formatSize(n), m, err)
		}
	})
}

// TestFuzzCorpusCommitted keeps the committed seed corpus from going missing.
func TestFuzzCorpusCommitted(t *testing.T) {
	ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzParseSize"))
	if err != nil || len(ents) == 0 {
		t.Fatalf("seed corpus testdata/fuzz/FuzzParseSize is missing: %v", err)
	}
}
