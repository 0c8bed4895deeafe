package admit

import (
	"errors"
	"testing"
)

func TestParsePriority(t *testing.T) {
	for in, want := range map[string]Priority{"": 0, "low": Low, " Normal ": Normal, "HIGH": High} {
		got, err := ParsePriority(in)
		if err != nil || got != want {
			t.Errorf("ParsePriority(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"urgent", "1", "hi"} {
		if _, err := ParsePriority(in); !errors.Is(err, ErrBadPriority) {
			t.Errorf("ParsePriority(%q) = %v, want ErrBadPriority", in, err)
		}
	}
}

func TestPolicyEffective(t *testing.T) {
	p, err := ParsePolicy("peer=normal, operator=high, spiffe://td/ci=low, token:batch=high, anonymous=low")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		caller   string
		operator bool
		asked    Priority
		want     Priority
	}{
		{"spiffe://td/peer", false, 0, Normal},    // none asked: normal
		{"spiffe://td/peer", false, High, Normal}, // a peer is capped at normal
		{"spiffe://td/peer", false, Low, Low},     // asking lower is always allowed
		{"spiffe://td/op", true, High, High},      // an operator may ask high
		{"spiffe://td/op", true, 0, Normal},       // but gets normal unless asked
		{"spiffe://td/ci", false, 0, Low},         // a caller capped at low is low, asked or not
		{"spiffe://td/ci", true, High, Low},       // its own entry beats the operator class
		{"token:batch", false, High, High},        // a named caller raised above peers
		{"", false, Normal, Low},                  // the anonymous development caller
		{"spiffe://td/other", false, Normal, Normal},
	} {
		if got := p.Effective(tc.caller, tc.operator, tc.asked); got != tc.want {
			t.Errorf("Effective(%q, operator=%v, %s) = %s, want %s", tc.caller, tc.operator, tc.asked, got, tc.want)
		}
	}
	var zero Policy
	if zero.Cap("x", false) != Normal || zero.Cap("x", true) != High {
		t.Error("the zero policy is not peer=normal, operator=high")
	}
	if got := p.String(); got != "peer=normal,operator=high,anonymous=low,spiffe://td/ci=low,token:batch=high" {
		t.Errorf("String() = %q", got)
	}
	if rt, err := ParsePolicy(p.String()); err != nil || rt.String() != p.String() {
		t.Errorf("round trip: %v, %v", rt, err)
	}
}

func TestParsePolicyRefuses(t *testing.T) {
	for _, in := range []string{"peer", "peer=urgent", "=high", "somebody=high", "peer=", "token:a=low,token:a=high"} {
		if _, err := ParsePolicy(in); err == nil {
			t.Errorf("ParsePolicy(%q) accepted", in)
		}
	}
	p, err := ParsePolicy("")
	if err != nil || p.String() != DefaultPolicy {
		t.Errorf("ParsePolicy(\"\") = %v, %v", p, err)
	}
}
