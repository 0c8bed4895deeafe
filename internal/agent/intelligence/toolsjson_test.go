package intelligence

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/api"
)

// compactCases is JSON that json.Marshal rewrites when it writes a
// json.RawMessage: spaces between tokens, HTML characters and U+2028,
// U+2029 (in strings, with escaped quotes and backslashes before them).
var compactCases = []string{
	`{}`, `[]`, `null`, `1`, `"s"`, ` { } `, "\t[ 1 ,\n 2 ]\r\n",
	`{"a": "b c", "d" : [1, 2, {"e": null}], "f": true}`,
	`{"q": "say \"<b>\" & \\ <i>", "k\"<": ">"}`,
	"{\"l\": \"a\u2028b\u2029c \\u2028\", \"m\": \"\xe2\x80\xa7 \xe2\x80 \xe2\"}",
	`{"n": 12345678901234567890, "x": -1.5e300, "u": "\u00e9\ud83d\ude00"}`,
	`"\\"`, `["\\\\", "\\\"", " \" "]`,
}

// appendCompact writes what json.Marshal writes for a json.RawMessage, and
// compactLen counts it.
func TestAppendCompactIsJSONMarshal(t *testing.T) {
	for _, c := range append(compactCases, string(api.SelfToolSpecs()[0].InputSchema)) {
		checkCompact(t, []byte(c))
	}
}

func FuzzAppendCompact(f *testing.F) {
	for _, c := range compactCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if json.Valid(b) {
			checkCompact(t, b)
		}
	})
}

func checkCompact(t *testing.T, src []byte) {
	t.Helper()
	want, err := json.Marshal(json.RawMessage(src))
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	if got := appendCompact([]byte("x"), src); string(got) != "x"+string(want) {
		t.Fatalf("%q: got %q, want %q", src, got[1:], want)
	}
	if n := compactLen(src); n != len(want) {
		t.Fatalf("%q: length %d, want %d", src, n, len(want))
	}
}

// A tool's schema is taken as it is when json.Unmarshal into a map would
// take it (a JSON object), and replaced by the empty object schema
// otherwise, as before the schemas were no longer decoded.
func TestToolParametersTakesWhatAMapWould(t *testing.T) {
	for _, in := range []string{"", "null", " null ", "{}", ` {"type":"object"} `, "[]", `"x"`, "1", "{", `{"a":}`, "{} {}", `{} x`, "\n{\"a\":1}\n", `{"a":1}]`} {
		var m map[string]json.RawMessage
		want := len(in) > 0 && json.Unmarshal([]byte(in), &m) == nil && m != nil
		if got := isObject([]byte(in)); got != want {
			t.Errorf("%q: isObject %v, want %v", in, got, want)
		}
		if got := string(toolParameters(json.RawMessage(in))); (got == in) != want {
			t.Errorf("%q: parameters %s", in, got)
		}
	}
}

// captureServer is a model endpoint on 127.0.0.1 that keeps every
// request's body and answers each with answer.
func captureServer(t *testing.T, answer string) (*server, func() [][]byte) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		answerWith(http.StatusOK, answer)(w, r)
	})
	return srv, func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return bodies
	}
}

// toolsRequest offers the self-tools and a tool whose schema json.Marshal
// rewrites (spaces, HTML characters), with a tool call sent back.
func toolsRequest() *Request {
	req := figure9Call()
	req.Tools = append(req.Tools, ToolSpec{Name: "odd", Description: "a <tool> & more\u2028", Parameters: json.RawMessage(compactCases[8])},
		ToolSpec{Name: "none"}, ToolSpec{Name: "notobject", Parameters: json.RawMessage(`[1]`)})
	req.Messages[1].ToolCalls = append(req.Messages[1].ToolCalls, ToolCall{ID: "c<2>", Name: "odd", Args: json.RawMessage(compactCases[8])})
	req.Messages = append(req.Messages, Message{Role: RoleTool, ToolCallID: "c<2>", Content: "ok"})
	return req
}

// What goes on the wire for each call, its tools encoded once by the
// model, is what json.Marshal writes for the request built whole, both
// dialects, at the first call and the next.
func TestRequestOnTheWireIsJSONMarshal(t *testing.T) {
	req := toolsRequest()
	t.Run("openai", func(t *testing.T) {
		srv, bodies := captureServer(t, okBody("done"))
		m, err := newOpenAIModel(api.Intelligence{Endpoint: srv.endpoint(), Model: "m"}, "")
		if err != nil {
			t.Fatal(err)
		}
		cr := m.chatRequest(req)
		cr.Tools = chatTools(req.Tools)
		want, err := json.Marshal(cr)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := m.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		for i, b := range bodies() {
			if !bytes.Equal(b, want) {
				t.Fatalf("call %d: body differs from json.Marshal:\n got %.400q\nwant %.400q", i+1, b, want)
			}
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		srv, bodies := captureServer(t, `{"type":"message","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`)
		m, err := newAnthropicModel(api.Intelligence{Endpoint: srv.endpoint(), Model: "m", Dialect: api.DialectAnthropic}, "")
		if err != nil {
			t.Fatal(err)
		}
		mr := m.messagesRequest(req)
		mr.Tools = msgTools(req.Tools)
		want, err := json.Marshal(mr)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := m.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		for i, b := range bodies() {
			if !bytes.Equal(b, want) {
				t.Fatalf("call %d: body differs from json.Marshal:\n got %.400q\nwant %.400q", i+1, b, want)
			}
		}
	})
	if !strings.Contains(compactCases[8], "<b>") {
		t.Fatal("the odd tool's schema has no HTML character")
	}
}

// A model encodes the tools it offers once: the next call that offers the
// same tools writes its body from its parts, the tools already encoded and
// the tool call's arguments by reference, allocating a few KiB for figure
// 9's second call. Encoding the self-tools for every call (json.Marshal,
// each schema decoded into a map) made about 85 KiB of garbage a call, and
// the arguments were copied into a string (16 KiB).
func TestToolsEncodedOnce(t *testing.T) {
	req := figure9Call()
	buf := make([]byte, 32<<10)
	for _, dialect := range []string{api.DialectOpenAI, api.DialectAnthropic} {
		var body func(*Request) (*jsonBody, error)
		spec := api.Intelligence{Endpoint: "http://127.0.0.1:1/v1", Model: "m", Dialect: dialect}
		if dialect == api.DialectOpenAI {
			m, err := newOpenAIModel(spec, "")
			if err != nil {
				t.Fatal(err)
			}
			body = m.body
		} else {
			m, err := newAnthropicModel(spec, "")
			if err != nil {
				t.Fatal(err)
			}
			body = m.body
		}
		var size int64
		n := allocated(t, func() {
			b, err := body(req)
			if err != nil {
				t.Fatal(err)
			}
			rc, _, _ := b.open()
			if size, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{rc}, buf); err != nil {
				t.Fatal(err)
			}
		})
		if n > 8<<10 {
			t.Errorf("%s: the body of a %d-byte request allocated %d bytes; want at most 8 KiB (the tools encoded once)", dialect, size, n)
		}
	}
}

// A large JSON value (a tool_use block's input) is written by reference
// only when json.Marshal would write it as it is: one whose spaces and
// escapes would leave its length the same is still rewritten.
func TestLargeJSONWrittenAsMarshalWould(t *testing.T) {
	long := strings.Repeat("x", bigString)
	for _, in := range []string{
		`{"a":"` + long + `"}`,
		`{"a":     "` + long + `<"}`,
		`{"a": "` + long + `\u2028"}`,
		`{"a":"` + long + `"}  `,
	} {
		r := msgRequest{Model: "m", Messages: []msgMessage{{Role: "assistant", Content: []msgBlock{{Type: "tool_use", ID: "t", Name: "n", Input: json.RawMessage(in)}}}}}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b, err := messagesBody(&r)
		if err != nil {
			t.Fatal(err)
		}
		rc, size, _ := b.open()
		got, err := io.ReadAll(rc)
		if err != nil || !bytes.Equal(got, want) || size != int64(len(want)) {
			t.Errorf("%.40q...: body (%d bytes, length %d) differs from json.Marshal:\n got %q\nwant %q", in, len(got), size, got[len(got)-60:], want[len(want)-60:])
		}
	}
}

// The first call encodes the self-tools into one slice of their length
// and allocates little else: the schemas are checked without decoding them
// (json.Unmarshal into a map made 21 KiB for the self-tools) and encoded
// without encoding/json (json.Marshal of the tools made 63 KiB).
func TestToolsEncodedIntoTheirLength(t *testing.T) {
	specs := figure9Call().Tools
	for _, dialect := range []string{api.DialectOpenAI, api.DialectAnthropic} {
		var enc []byte
		n := allocated(t, func() {
			var err error
			if dialect == api.DialectOpenAI {
				enc, err = chatToolsJSON(chatTools(specs))
			} else {
				enc, err = msgToolsJSON(msgTools(specs))
			}
			if err != nil {
				t.Fatal(err)
			}
		})
		if cap(enc) != len(enc) {
			t.Errorf("%s: the tools encoded in %d bytes of a slice of %d", dialect, len(enc), cap(enc))
		}
		if limit := uint64(len(enc)) + 2<<10; n > limit {
			t.Errorf("%s: encoding %d tools (%d bytes) allocated %d bytes; want at most %d", dialect, len(specs), len(enc), n, limit)
		}
	}
}

// An object schema's own "type" is found as json.Unmarshal into a map
// finds it: not a nested one's, nor a value, and a key with escapes read.
func TestInputSchemaFindsTypeAsAMapWould(t *testing.T) {
	for _, in := range []string{
		`{"type":"object"}`, `{ "type" : 1 }`, `{"a":{"type":"x"}}`, `{"a":"type"}`, `{"a":["type",{"type":1}],"b":2}`,
		`{"typ\u0065":"object"}`, `{"t\"ype":1}`, `{"a":"\"","type":1}`, `{"a":{"b":[{}]},"type":null}`, `{}`, `{"types":1}`,
		`{"a\\":"x","type":"y"}`, `{"a":"}","type":1}`,
	} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(in), &m); err != nil {
			t.Fatal(err)
		}
		_, want := m["type"]
		if got := hasKey([]byte(in), "type"); got != want {
			t.Errorf("%s: hasKey %v, want %v", in, got, want)
		}
	}
}
