package intelligence

import (
	"encoding/json"
	"strings"
	"testing"
)

// argsCases are JSON strings with every kind of escape encoding/json
// decodes, surrogate pairs whole and lone, and bytes that are not UTF-8.
var argsCases = []string{
	`""`, `"plain"`, `"{\"handle\":\"h\"}"`, `"\\ \/ \b\f\n\r\t \u0041\u00e9\u4e2d"`,
	`"\ud83d\ude00 pair"`, `"\ud83d lone high"`, `"\ude00 lone low"`, `"\ud83d\u0041 high then not low"`, `"\ud83d\ud83d\ude00"`,
	"\"\xff\xfe bad \xe2\x82 cut \u00e9 é中😀\"", `"<html> & \u2028"`, `"end \ud83d"`,
}

// A tool call's arguments are read as encoding/json reads a string: the
// same bytes, null leaving them as they are, another kind of value an error.
func TestChatArgsReadAsAString(t *testing.T) {
	for _, c := range argsCases {
		checkArgs(t, []byte(c))
	}
	a := chatArgs("kept")
	if err := json.Unmarshal([]byte("null"), &a); err != nil || string(a) != "kept" {
		t.Errorf("null: %q, %v; want kept as it was", a, err)
	}
	for _, in := range []string{`{"a":1}`, `[1]`, `1`, `true`} {
		var s string
		var a chatArgs
		if json.Unmarshal([]byte(in), &s) == nil || json.Unmarshal([]byte(in), &a) == nil {
			t.Errorf("%s: read as arguments; want an error, as for a string", in)
		}
	}
}

func FuzzChatArgs(f *testing.F) {
	for _, c := range argsCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if json.Valid(b) && len(b) > 0 && b[0] == '"' {
			checkArgs(t, b)
		}
		if q := append(append([]byte(`"`), b...), '"'); json.Valid(q) {
			checkArgs(t, q)
		}
	})
}

func checkArgs(t *testing.T, lit []byte) {
	t.Helper()
	var want string
	if err := json.Unmarshal(lit, &want); err != nil {
		t.Fatalf("%q: %v", lit, err)
	}
	var got chatArgs
	if err := json.Unmarshal(lit, &got); err != nil {
		t.Fatalf("%q: %v", lit, err)
	}
	if string(got) != want || cap(got) != len(got) {
		t.Fatalf("%q: read %q (cap %d), want %q", lit, got, cap(got), want)
	}
	if back, err := json.Marshal(got); err != nil || string(back) != string(must(json.Marshal(want))) {
		t.Fatalf("%q: written back as %s, %v", lit, back, err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// A completion's tool call arguments are unquoted once, into the slice the
// ToolCall keeps: decoding figure 9's first answer (16 KiB of arguments)
// allocates their length and a little. encoding/json unquoted them into a
// buffer and copied that into a string, which convertCompletion copied
// again: three times their length.
func TestAnswerArgumentsUnquotedOnce(t *testing.T) {
	args, _ := json.Marshal(map[string]string{"handle": strings.Repeat("h", 16<<10)})
	answer, _ := json.Marshal(map[string]any{
		"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
			"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call-0", "type": "function",
				"function": map[string]any{"name": "subagent_status", "arguments": string(args)}}}}}},
		"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 10},
	})
	req := &Request{}
	var got *Response
	n := allocated(t, func() {
		var cr chatResponse
		if err := json.Unmarshal(answer, &cr); err != nil {
			t.Fatal(err)
		}
		var err error
		if got, err = convertCompletion(&cr, req); err != nil {
			t.Fatal(err)
		}
	})
	if len(got.ToolCalls) != 1 || string(got.ToolCalls[0].Args) != string(args) {
		t.Fatalf("tool calls %+v", got.ToolCalls)
	}
	if limit := uint64(len(args)) + 4<<10; n > limit {
		t.Fatalf("decoding a %d-byte answer with %d bytes of arguments allocated %d bytes; want at most %d (the arguments once)", len(answer), len(args), n, limit)
	}
}
