package jsonscan

import (
	"encoding/json"
	"testing"
)

func TestValueEnd(t *testing.T) {
	for _, tc := range []struct {
		text  string
		start int
		want  string // the value found
	}{
		{`"a\"b" ,`, 0, `"a\"b"`},
		{`{"a":[1,{"b":"}"}],"c":2} x`, 0, `{"a":[1,{"b":"}"}],"c":2}`},
		{`[1, "]", [2]]`, 0, `[1, "]", [2]]`},
		{`{"n":-1.5e3,"t":true}`, 5, `-1.5e3`},
		{`{"t":true}`, 5, `true`},
		{`null`, 0, `null`},
		{` 12 `, 1, `12`},
	} {
		if got := tc.text[tc.start:ValueEnd([]byte(tc.text), tc.start)]; got != tc.want {
			t.Errorf("ValueEnd(%q, %d) found %q, want %q", tc.text, tc.start, got, tc.want)
		}
	}
}

func TestStringEnd(t *testing.T) {
	for _, tc := range []struct {
		text    string
		end     int
		escaped bool
	}{
		{`"plain" rest`, 7, false},
		{`"a\\" rest`, 5, true},
		{`"a\"b"`, 6, true},
		{`"open`, 5, false},
	} {
		end, esc := StringEnd([]byte(tc.text), 0)
		if end != tc.end || esc != tc.escaped {
			t.Errorf("StringEnd(%q) = %d, %v; want %d, %v", tc.text, end, esc, tc.end, tc.escaped)
		}
	}
	if got := SkipSpace([]byte(" \t\r\n x"), 0); got != 5 {
		t.Errorf("SkipSpace = %d, want 5", got)
	}
}

// FuzzValueEnd: over any valid JSON text, the value found at its start
// is the whole text less its trailing space.
func FuzzValueEnd(f *testing.F) {
	for _, s := range []string{`{"a":[1,"]"]}`, `"x\"y"`, `-0.5e+2`, `[[],{}]`, `true`, `{"k":"\\"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		if !json.Valid(b) {
			return
		}
		i := SkipSpace(b, 0)
		end := ValueEnd(b, i)
		if SkipSpace(b, end) != len(b) || !json.Valid(b[i:end]) {
			t.Fatalf("ValueEnd(%q, %d) = %d", s, i, end)
		}
	})
}
