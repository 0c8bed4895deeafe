package intelligence

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// trickyText has every kind of character json.Marshal escapes or replaces,
// around the length from which jsonBody writes a string by reference.
func trickyText(n int) string {
	parts := []string{"plain words ", `"quoted" `, `back\slash `, "<html> & ", "\n\r\t\b\f", "\x00\x01\x1f", "é中😀 ", "\u2028\u2029", "\xff\xfe bad ", "\xe2\x82 cut "}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(parts[i%len(parts)])
	}
	return b.String()
}

// The chat request's body, read at any pace, is the bytes json.Marshal
// writes for it, and its Content-Length is their count.
func TestChatBodyIsJSONMarshal(t *testing.T) {
	args := `{"handle":"` + strings.Repeat("h", 2000) + `","note":"<a>&"}`
	empty := ""
	for _, n := range []int{0, 10, bigString - 1, bigString, bigString + 1, 5000, 70 << 10} {
		text := trickyText(n)
		cr := chatRequest{Model: "m<1>", Messages: []chatMessage{
			{Role: "system", Content: &text},
			{Role: "user", Content: &text},
			{Role: "assistant", ToolCalls: []chatToolCall{
				{ID: "c1", Type: "function", Function: chatFunctionCall{Name: "subagent_status", Arguments: chatArgs(args)}},
				{ID: "c2", Type: "custom", Function: chatFunctionCall{Name: "x", Arguments: chatArgs(text)}, Custom: &chatCustomCall{Name: "x", Input: "in"}},
			}},
			{Role: "tool", ToolCallID: "c1", Content: &text},
			{Role: "user", Content: &empty},
		}, Tools: []chatTool{{Type: "function", Function: chatFunction{Name: "t", Description: "a <tool>", Parameters: json.RawMessage(`{"type": "object", "properties": {}}`)}}},
			Stream: true, StreamOptions: &chatStreamOptions{IncludeUsage: true}}
		for _, c := range []chatRequest{cr, {Model: "m"}, {Model: "m", Messages: cr.Messages[:2]}} {
			want, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			b, err := chatBody(&c)
			if err != nil {
				t.Fatal(err)
			}
			for name, read := range map[string]func(io.Reader) ([]byte, error){
				"ReadAll":     io.ReadAll,
				"a byte each": func(r io.Reader) ([]byte, error) { return io.ReadAll(iotest.OneByteReader(r)) },
				"1000 then WriteTo": func(r io.Reader) ([]byte, error) {
					var out bytes.Buffer
					if _, err := io.CopyN(&out, struct{ io.Reader }{r}, 1000); err != nil && err != io.EOF {
						return nil, err
					}
					_, err := r.(io.WriterTo).WriteTo(&out)
					return out.Bytes(), err
				},
				"7 at a time": func(r io.Reader) ([]byte, error) {
					var out []byte
					p := make([]byte, 7)
					for {
						k, err := r.Read(p)
						out = append(out, p[:k]...)
						if err == io.EOF {
							return out, nil
						}
						if err != nil {
							return out, err
						}
					}
				},
			} {
				rc, size, err := b.open()
				if err != nil {
					t.Fatal(err)
				}
				got, err := read(rc)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%d-byte text, read %s: body differs from json.Marshal:\n got %.300q\nwant %.300q", n, name, got, want)
				}
				if size != int64(len(want)) {
					t.Fatalf("%d-byte text: length %d, body %d bytes", n, size, len(want))
				}
			}
		}
	}
}

// Encoding a model call's request makes no copy of its conversation: for
// figure 9's 64 KiB turn (twice in the request, as the system prompt's
// objective and as the first user turn) and a 16 KiB tool round trip, the
// body written onto the connection allocates a few KiB. json.Marshal
// allocated about 700 KiB for it (its buffer grown by doubling to the whole
// request, then copied).
func TestChatBodyCopiesNoConversation(t *testing.T) {
	turn := strings.Repeat("the agent read the file and found ", 64<<10/34)
	result := strings.Repeat("h", 16<<10)
	args := `{"handle":"` + result + `"}`
	m := &openAIModel{model: "bench"}
	req := &Request{System: "Objective:\n" + turn, Messages: []Message{
		{Role: RoleUser, Content: turn},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call-0", Name: "subagent_status", Args: json.RawMessage(args)}}},
		{Role: RoleTool, ToolCallID: "call-0", Content: "ERROR: no subagent " + result},
	}}
	cr := m.chatRequest(req)
	buf := make([]byte, 32<<10) // net/http's copy buffer
	write := func() int64 {
		b, err := chatBody(&cr)
		if err != nil {
			t.Fatal(err)
		}
		rc, _, _ := b.open()
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{rc}, buf)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := write()
	alloc := uint64(math.MaxUint64)
	for range 3 { // the least of three: the process's other goroutines allocate too
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		write()
		runtime.ReadMemStats(&after)
		alloc = min(alloc, after.TotalAlloc-before.TotalAlloc)
	}
	if alloc > 16<<10 {
		t.Fatalf("writing a %d-byte request allocated %d bytes; want at most 16 KiB (no copy of its conversation)", n, alloc)
	}
}

// The Messages request's body is the bytes json.Marshal writes for it.
func TestMessagesBodyIsJSONMarshal(t *testing.T) {
	for _, n := range []int{0, 10, bigString, 5000, 70 << 10} {
		text := trickyText(n)
		r := msgRequest{Model: "claude", MaxTokens: 4096, System: text, Messages: []msgMessage{
			{Role: "user", Content: []msgBlock{{Type: "text", Text: text}}},
			{Role: "assistant", Content: []msgBlock{{Type: "text", Text: "ok"}, {Type: "tool_use", ID: "t1", Name: "subagent_status", Input: json.RawMessage(`{ "handle" : "<h>` + strings.Repeat("x", n) + `" }`)}}},
			{Role: "user", Content: []msgBlock{{Type: "tool_result", ToolUseID: "t1", Content: text}}},
			{Role: "user"},
		}, Tools: []msgTool{{Name: "t", Description: "d&", InputSchema: json.RawMessage(`{"type":"object"}`)}}, Stream: true}
		for _, c := range []msgRequest{r, {Model: "m"}, {Model: "m", MaxTokens: 1, Messages: r.Messages[:1]}} {
			want, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			b, err := messagesBody(&c)
			if err != nil {
				t.Fatal(err)
			}
			rc, size, _ := b.open()
			got, err := io.ReadAll(iotest.HalfReader(rc))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || size != int64(len(want)) {
				t.Fatalf("%d-byte text: body (%d bytes, length %d) differs from json.Marshal:\n got %.300q\nwant %.300q", n, len(got), size, got, want)
			}
		}
	}
}

// figure9Request is a chat request like figure 9's second call.
func figure9Request() chatRequest {
	turn := strings.Repeat("the agent read the file and found ", 64<<10/34)
	result := strings.Repeat("h", 16<<10)
	m := &openAIModel{model: "bench"}
	return m.chatRequest(&Request{System: "Objective:\n" + turn, Messages: []Message{
		{Role: RoleUser, Content: turn},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call-0", Name: "subagent_status", Args: json.RawMessage(`{"handle":"` + result + `"}`)}}},
		{Role: RoleTool, ToolCallID: "call-0", Content: "ERROR: no subagent " + result},
	}})
}

// Writing figure 9's request from its parts, against json.Marshal and a
// write of its bytes (the CPU a model call spends on its request).
func BenchmarkRequestBody(b *testing.B) {
	cr := figure9Request()
	buf := make([]byte, 32<<10)
	b.Run("jsonBody", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			body, _ := chatBody(&cr)
			rc, _, _ := body.open()
			_, _ = io.CopyBuffer(io.Discard, struct{ io.Reader }{rc}, buf)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			enc, _ := json.Marshal(cr)
			_, _ = io.CopyBuffer(io.Discard, struct{ io.Reader }{bytes.NewReader(enc)}, buf)
		}
	})
}
