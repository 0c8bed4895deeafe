package intelligence

import (
	"context"
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
