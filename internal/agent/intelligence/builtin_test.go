package intelligence

import (
	"context"
	"strings"
	"testing"
)

// TestDemoModel covers a one-line objective; the fan-out of several lines is
// TestDemoFansOut in package agent's script_test.go.
func TestDemoModel(t *testing.T) {
	r, _ := newDemoModel(0).Complete(context.Background(), &Request{System: "sys", Objective: "hello brave world"})
	if r.Content != `"hello brave world" has 3 words and 17 characters` {
		t.Fatalf("one line: %q", r.Content)
	}
	if r.Usage.TokensIn == 0 || r.Usage.TokensOut == 0 {
		t.Fatalf("no usage: %+v", r.Usage)
	}
}

// A builtin model counts a request's tokens (one per four bytes of its system
// prompt and messages) without writing the request's text out: it built
// the whole request as one string to take its length, fresh heap pages in
// the warm pool's rehearsing child (performance.md, figure 9).
func TestUsageCountsWithoutCopying(t *testing.T) {
	req := &Request{System: "be brief", Messages: []Message{{Role: RoleUser, Content: strings.Repeat("word ", 100)}, {Role: RoleAssistant, Content: "ok"}}}
	if got, want := usageOf(req, "four").TokensIn, int64((len("be brief")+500+2+3)/4); got != want {
		t.Fatalf("tokens in %d, want %d", got, want)
	}
	if raceEnabled {
		t.Skip("the race detector changes what is allocated")
	}
	if n := testing.AllocsPerRun(100, func() { usageOf(req, "four") }); n != 0 {
		t.Fatalf("counting a request's tokens allocated %v times, want none", n)
	}
}
