package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSubagentResultRoundTrip(t *testing.T) {
	for _, r := range []SubagentResult{
		{Status: StatusCompleted, Distillate: InlineText("words: 3"), Usage: Usage{TokensIn: 10, TokensOut: 4, Steps: 1}},
		{Status: StatusCompleted, Distillate: ResultBody{Inline: json.RawMessage(`{"a":1}`)}},
		{Status: StatusExhaustedSteps, Distillate: ResultBody{Reference: &Reference{URI: "https://x/blobs/1", Summary: "big"}}, Detail: "50 steps"},
		{Status: StatusCrashed, Cause: CauseProtocolViolation},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var got SubagentResult
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		if len(r.Distillate.Inline) == 0 && r.Distillate.Reference == nil {
			r.Distillate = ResultBody{Inline: json.RawMessage(`""`)}
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v\n(%s)", got, r, b)
		}
	}
}

func TestResultRefusesUnknowns(t *testing.T) {
	for _, bad := range []string{
		`{"status":"finished","distillate":{"kind":"inline","value":"x"},"usage":{}}`,
		`{"status":"completed","distillate":{"kind":"blob"},"usage":{}}`,
		`{"status":"completed","distillate":{"kind":"reference"},"usage":{}}`,
		`{"status":"completed","distillate":{"kind":"inline","value":"x","uri":"u"},"usage":{}}`,
	} {
		var r SubagentResult
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestNineStatuses(t *testing.T) {
	if len(TerminalStatuses) != 9 {
		t.Fatalf("%d statuses, want the closed set of nine", len(TerminalStatuses))
	}
	if TerminalStatus("").Valid() || TerminalStatus("done").Valid() {
		t.Fatal("a status outside the set is valid")
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		r    SubagentResult
		want int
	}{
		{SubagentResult{Status: StatusCompleted}, 0},
		{SubagentResult{Status: StatusCrashed}, 1},
		{SubagentResult{Status: StatusCancelled}, 1},
		{SubagentResult{Status: StatusExhaustedSteps}, 3},
		{SubagentResult{Status: StatusStalled}, 3},
		{SubagentResult{Status: StatusLoopDetected}, 3},
		{SubagentResult{Status: StatusCrashed, Cause: CauseIntelligenceUnreachable}, 4},
		{SubagentResult{Status: StatusRefused}, 5},
		{SubagentResult{Status: StatusCrashed, Cause: CauseMCPUnavailable}, 6},
		{SubagentResult{Status: StatusExhaustedTokens}, 7},
		{SubagentResult{Status: StatusCancelled, Cause: CauseTreeTokenCeiling}, 7},
		{SubagentResult{Status: StatusDeadline}, 124},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.r); got != tt.want {
			t.Errorf("ExitCode(%s/%s) = %d, want %d", tt.r.Status, tt.r.Cause, got, tt.want)
		}
	}
}

// textByUnmarshal is ResultBody.Text as json.Unmarshal alone decides it.
func textByUnmarshal(b ResultBody) string {
	if b.Reference != nil {
		return b.Reference.Summary
	}
	var s string
	if len(b.Inline) > 0 && b.Inline[0] == '"' && json.Unmarshal(b.Inline, &s) == nil {
		return s
	}
	return string(b.Inline)
}

// FuzzResultBodyText: Text reads an inline body as json.Unmarshal does,
// whatever the bytes (escapes, quotes inside, control characters, invalid
// UTF-8, space after the literal, no literal at all).
func FuzzResultBodyText(f *testing.F) {
	for _, s := range []string{`"ok"`, `""`, `"a\"b"`, `"a"b"`, "\"a\x01b\"", "\"\xff\"", `"ok" `, `"é ✓"`, `"`, `42`, `{"a":1}`, `"\u00e9"`, "\"\x7f\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, inline []byte) {
		b := ResultBody{Inline: inline}
		if got, want := b.Text(), textByUnmarshal(b); got != want {
			t.Fatalf("Text of %q = %q, json.Unmarshal reads %q", inline, got, want)
		}
	})
}

// TestResultBodyTextAllocs: an inline text without escapes is read with one
// allocation, its string (json.Unmarshal made 3, with a pass of its own over
// the literal): the distillate of every task's artifact.
func TestResultBodyTextAllocs(t *testing.T) {
	if raceOn {
		t.Skip("the race detector allocates")
	}
	b := InlineText("a distillate of a few words")
	if n := testing.AllocsPerRun(100, func() { _ = b.Text() }); n > 1 {
		t.Errorf("Text of an inline string: %v allocations, want 1", n)
	}
}
