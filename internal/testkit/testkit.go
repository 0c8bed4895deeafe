// Package testkit holds the small helpers the tests of every package share:
// a buffer safe for concurrent writes (a log sink, a process's output), the
// JSON log records in it, polling until a condition holds, looks at processes
// and process groups through /proc (Linux), a port for a server that must be
// told it before it binds it (FreePort), and a span recorder installed as
// the global tracer provider. The A2A packages' own helpers (messages, sends,
// a fake provider, a plain A2A peer) are in internal/a2atest.
//
// It is for tests and the benchmark harness (bench/) only; the agentd binary
// never imports it.
package testkit

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer collects what is written to it. It is safe for concurrent use, so
// one Buffer can be the sink of a logger shared by goroutines, or a child
// process's stderr while the test reads it. The zero value is an empty
// buffer ready to use.
type Buffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Records returns the JSON log records written so far whose "msg" is msg.
func (b *Buffer) Records(msg string) []map[string]any {
	return WithMsg(JSONLines(b.String()), msg)
}

// JSONLines decodes a JSON log, one record per line, skipping every line that
// is not a JSON object (a panic's trace, a child's plain output).
func JSONLines(log string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(log, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec != nil {
			out = append(out, rec)
		}
	}
	return out
}

// WithMsg returns the records whose "msg" is msg.
func WithMsg(recs []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if m, _ := r["msg"].(string); m == msg {
			out = append(out, r)
		}
	}
	return out
}

// PollInterval is how long Poll and WaitFor sleep between two evaluations of
// the condition.
const PollInterval = 2 * time.Millisecond

// Poll evaluates cond every PollInterval until it holds or within has
// passed, and reports whether it held. It is for waits whose timeout is not a
// failure; WaitFor fails the test.
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(PollInterval)
	}
	return true
}

// WaitFor polls cond until it holds, and fails the test (t.Fatalf, so from
// the test's goroutine only) with "what: not within d" if it does not within
// d. what says what was awaited ("the child stopped").
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("%s: not within %s", what, within)
	}
}
