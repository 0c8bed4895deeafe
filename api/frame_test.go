package api

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewFrameWriter(&buf, 0)
	if err := w.Send(MethodReady, 0, Ready{PID: 42}); err != nil {
		t.Fatal(err)
	}
	if err := w.Send(MethodToolCall, 7, ToolCall{Tool: "subagent.spawn"}); err != nil {
		t.Fatal(err)
	}
	resp, _ := NewResponse(7, TextResult("ok", false))
	if err := w.Write(resp); err != nil {
		t.Fatal(err)
	}
	r := NewFrameReader(&buf, 0)
	f, err := r.Read()
	if err != nil || f.Method != MethodReady {
		t.Fatalf("first frame: %+v %v", f, err)
	}
	var ready Ready
	if err := DecodeParams(f, &ready); err != nil || ready.PID != 42 {
		t.Fatalf("ready params: %+v %v", ready, err)
	}
	if f, err = r.Read(); err != nil || f.ID != 7 || f.Method != MethodToolCall {
		t.Fatalf("second frame: %+v %v", f, err)
	}
	if f, err = r.Read(); err != nil || !f.IsResponse() || f.ID != 7 {
		t.Fatalf("third frame: %+v %v", f, err)
	}
	if _, err = r.Read(); err != io.EOF {
		t.Fatalf("end of stream: %v, want io.EOF", err)
	}
}

func frameBytes(body string) []byte {
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b
}

func TestFrameReaderRejects(t *testing.T) {
	huge := make([]byte, 4)
	binary.BigEndian.PutUint32(huge, 100<<20)
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"over the limit", huge, ErrFrameTooLarge},
		{"not json", frameBytes("hello"), ErrFrameInvalid},
		{"wrong version", frameBytes(`{"jsonrpc":"1.0","method":"x"}`), ErrFrameInvalid},
		{"neither request nor response", frameBytes(`{"jsonrpc":"2.0"}`), ErrFrameInvalid},
		{"response without result", frameBytes(`{"jsonrpc":"2.0","id":3}`), ErrFrameInvalid},
		{"request with result", frameBytes(`{"jsonrpc":"2.0","method":"x","result":1}`), ErrFrameInvalid},
		{"two objects", frameBytes(`{"jsonrpc":"2.0","method":"x"}{}`), ErrFrameInvalid},
		{"empty", frameBytes(""), ErrFrameInvalid},
		{"truncated body", frameBytes(`{"jsonrpc":"2.0","method":"x"}`)[:10], io.ErrUnexpectedEOF},
		{"truncated header", []byte{0, 0}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewFrameReader(bytes.NewReader(tt.in), 1<<20).Read()
			if !errors.Is(err, tt.want) {
				t.Fatalf("Read() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestFrameWriterRefusesOversize(t *testing.T) {
	w := NewFrameWriter(io.Discard, 64)
	err := w.Send(MethodEvent, 0, map[string]string{"pad": string(make([]byte, 100))})
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize write: %v", err)
	}
}

// FuzzReadFrame feeds arbitrary bytes to the decoder: it must never panic, and a
// frame it accepts must survive a re-encode unchanged.
func FuzzReadFrame(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"ctrl/ready","params":{"pid":1}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}`,
		`{"jsonrpc":"2.0","method":"result","params":{"status":"completed","distillate":{"kind":"inline","value":"x"},"usage":{}}}`,
	} {
		f.Add(frameBytes(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewFrameReader(bytes.NewReader(data), 1<<16)
		for {
			fr, err := r.Read()
			if err != nil {
				return
			}
			enc, err := EncodeFrame(fr)
			if err != nil {
				t.Fatalf("accepted frame does not re-encode: %v", err)
			}
			again, err := NewFrameReader(bytes.NewReader(enc), 1<<16).Read()
			if err != nil {
				t.Fatalf("re-encoded frame does not decode: %v", err)
			}
			if !reflect.DeepEqual(normalize(fr), normalize(again)) {
				t.Fatalf("re-encode changed the frame: %+v vs %+v", fr, again)
			}
			if fr.Method == MethodResult {
				var res SubagentResult
				_ = DecodeParams(fr, &res)
			}
		}
	})
}

// normalize makes frames comparable by meaning: raw JSON is decoded, so that
// escaping differences (json.Marshal writes "&" as "\u0026") do not count.
func normalize(f *Frame) Frame {
	g := *f
	g.Params = semantic(g.Params)
	g.Result = semantic(g.Result)
	return g
}

func semantic(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

// TestFuzzCorpusCommitted keeps the committed seed corpus from going missing.
func TestFuzzCorpusCommitted(t *testing.T) {
	ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzReadFrame"))
	if err != nil || len(ents) == 0 {
		t.Fatalf("seed corpus testdata/fuzz/FuzzReadFrame is missing: %v", err)
	}
}

// Send and Respond encode in one pass what NewFrame/NewResponse and
// EncodeFrame would: byte for byte the same frames.
func TestSendAndRespondMatchEncodeFrame(t *testing.T) {
	p := SpawnPayload{Contract: OutputContract{Objective: "a <b> & \"c\"\n\u2028"}, Telemetry: Telemetry{RunID: "r"}}
	for _, tc := range []struct {
		name   string
		send   func(w *FrameWriter) error
		legacy func() (*Frame, error)
	}{
		{"notification", func(w *FrameWriter) error { return w.Send(MethodSpawn, 0, p) }, func() (*Frame, error) { return NewFrame(MethodSpawn, 0, p) }},
		{"request", func(w *FrameWriter) error {
			return w.Send(MethodToolCall, 42, ToolCall{Tool: "gh/search", Args: json.RawMessage(`{ "q" : 1 }`)})
		},
			func() (*Frame, error) {
				return NewFrame(MethodToolCall, 42, ToolCall{Tool: "gh/search", Args: json.RawMessage(`{ "q" : 1 }`)})
			}},
		{"no params", func(w *FrameWriter) error { return w.Send(MethodPause, 0, nil) }, func() (*Frame, error) { return NewFrame(MethodPause, 0, nil) }},
		{"odd method", func(w *FrameWriter) error { return w.Send("x<\"é\">", 3, Ping{Seq: 1}) }, func() (*Frame, error) { return NewFrame("x<\"é\">", 3, Ping{Seq: 1}) }},
		{"response", func(w *FrameWriter) error { return w.Respond(9, TextResult("<ok>", false)) }, func() (*Frame, error) { return NewResponse(9, TextResult("<ok>", false)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got bytes.Buffer
			if err := tc.send(NewFrameWriter(&got, 0)); err != nil {
				t.Fatal(err)
			}
			f, err := tc.legacy()
			if err != nil {
				t.Fatal(err)
			}
			want, err := EncodeFrame(f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("one-pass encoding:\n%q\nwant\n%q", got.Bytes(), want)
			}
			var viaWrite bytes.Buffer
			if err := NewFrameWriter(&viaWrite, 0).Write(f); err != nil || !bytes.Equal(viaWrite.Bytes(), want) {
				t.Fatalf("Write: %q %v, want %q", viaWrite.Bytes(), err, want)
			}
		})
	}
	var buf bytes.Buffer
	w := NewFrameWriter(&buf, 0)
	if err := w.Send("", 0, nil); err == nil {
		t.Error("Send without a method succeeded")
	}
	if err := w.Respond(0, 1); err == nil {
		t.Error("Respond without an id succeeded")
	}
	if err := NewFrameWriter(&buf, 10).Send(MethodSpawn, 0, p); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("Send over the limit: %v", err)
	}
	if buf.Len() != 0 {
		t.Errorf("refused frames wrote %d bytes", buf.Len())
	}
}

// A decoded frame's params share the body they came from (no copy), and
// decode as before.
func TestDecodeFrameBodySharesParams(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":4,"method":"tool/call","params":{"tool":"a/b"}}`)
	f, err := DecodeFrameBody(body)
	if err != nil {
		t.Fatal(err)
	}
	if string(f.Params) != `{"tool":"a/b"}` || f.ID != 4 || f.Method != MethodToolCall {
		t.Fatalf("frame = %+v", f)
	}
	if &f.Params[0] != &body[bytes.Index(body, []byte(`{"tool"`))] {
		t.Error("params were copied out of the body")
	}
}

// WriteParts writes one frame of its parts, concatenated; a frame over the
// limit, or an empty one, writes nothing; concurrent writers' frames do not
// interleave.
func TestWriteParts(t *testing.T) {
	var buf bytes.Buffer
	w := NewFrameWriter(&buf, 64)
	if err := w.WriteParts([]byte(`{"jsonrpc":"2.0","method":"loop/event","params":`), []byte(`{"step":1}`), nil, []byte(`}`)); err != nil {
		t.Fatal(err)
	}
	f, err := NewFrameReader(bytes.NewReader(buf.Bytes()), 0).Read()
	if err != nil || f.Method != MethodEvent || string(f.Params) != `{"step":1}` {
		t.Fatalf("frame %+v, %v", f, err)
	}
	n := buf.Len()
	if err := w.WriteParts(bytes.Repeat([]byte("x"), 40), bytes.Repeat([]byte("y"), 40)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("an 80-byte frame with a limit of 64: %v", err)
	}
	if err := w.WriteParts(nil, []byte{}); !errors.Is(err, ErrFrameInvalid) {
		t.Fatalf("an empty frame: %v", err)
	}
	if buf.Len() != n {
		t.Fatalf("a refused frame wrote %d bytes", buf.Len()-n)
	}

	pr, pw := io.Pipe()
	w = NewFrameWriter(pw, 0)
	done := make(chan error, 2)
	big := bytes.Repeat([]byte("a"), 100<<10)
	go func() {
		var err error
		for i := 0; i < 20 && err == nil; i++ {
			err = w.WriteParts([]byte(`{"jsonrpc":"2.0","method":"x","params":"`), big, []byte(`"}`))
		}
		done <- err
	}()
	go func() {
		var err error
		for i := 0; i < 20 && err == nil; i++ {
			err = w.Send(MethodPing, 0, Ping{Seq: uint64(i)})
		}
		done <- err
	}()
	r := NewFrameReader(pr, 0)
	for i := 0; i < 40; i++ {
		if _, err := r.Read(); err != nil {
			t.Fatalf("frame %d: %v (interleaved?)", i, err)
		}
	}
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// FrameSize is the size of the frame body Send writes, and measuring a
// large spawn payload leaves no copy of it behind (issue 35: the supervisor
// measured every spawn payload by encoding it into a buffer, 80 KB of garbage
// for a 64 KB objective).
func TestFrameSize(t *testing.T) {
	big := SpawnPayload{Contract: OutputContract{Objective: string(bytes.Repeat([]byte("the objective <&> "), 4000))}}
	for _, tc := range []struct {
		method string
		id     uint64
		params any
	}{
		{MethodSpawn, 0, SpawnPayload{Contract: OutputContract{Objective: "a <b> & \"c\"\n\u2028"}}},
		{MethodSpawn, 0, big},
		{MethodToolCall, 42, ToolCall{Tool: "gh/search", Args: json.RawMessage(`{ "q" : 1 }`)}},
		{MethodPause, 0, nil},
		{"x<\"é\">", 3, Ping{Seq: 1}},
	} {
		var out bytes.Buffer
		if err := NewFrameWriter(&out, 0).Send(tc.method, tc.id, tc.params); err != nil {
			t.Fatal(err)
		}
		n, err := FrameSize(tc.method, tc.id, tc.params)
		if err != nil || n != out.Len()-4 {
			t.Fatalf("FrameSize(%s) = %d, %v; Send wrote a body of %d bytes", tc.method, n, err, out.Len()-4)
		}
	}
	if _, err := FrameSize(MethodSpawn, 0, func() {}); err == nil {
		t.Fatal("FrameSize of params that do not encode succeeded")
	}
	if raceOn {
		return
	}
	if _, err := FrameSize(MethodSpawn, 0, &big); err != nil { // warm encoding/json's own buffers
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	const runs = 20
	runtime.ReadMemStats(&before)
	for range runs {
		if _, err := FrameSize(MethodSpawn, 0, &big); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 16<<10 {
		t.Fatalf("FrameSize of a %d-byte objective allocated %d bytes a call, want at most 16 KiB", len(big.Contract.Objective), per)
	}
}

// DecodeToolCall decodes a tool call as DecodeParams does, its args a slice
// of the frame's body rather than a copy (issue 35: a spawn's arguments, the
// child's objective, were copied once more in the supervisor per spawn).
func TestDecodeToolCallSharesArgs(t *testing.T) {
	for _, params := range []string{
		`{"tool":"subagent.spawn","args":{"contract":{"objective":"look <here>"}},"traceparent":"00-ab","conversation":{"step":3}}`,
		`{"tool":"gh/search","args":null}`,
		`{"tool":"gh/search"}`,
		`{"args":[1,2],"tool":"x"}`,
	} {
		body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tool/call","params":` + params + `}`)
		f, err := DecodeFrameBody(body)
		if err != nil {
			t.Fatal(err)
		}
		var want ToolCall
		if err := DecodeParams(f, &want); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeToolCall(f)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, %v; want %+v", params, got, err, want)
		}
		if len(got.Args) > 0 && &got.Args[0] != &body[bytes.Index(body, got.Args)] {
			t.Errorf("%s: args were copied out of the body", params)
		}
	}
	for _, params := range []string{`{"tool":1}`, `[]`} {
		if _, err := DecodeToolCall(&Frame{Method: MethodToolCall, Params: json.RawMessage(params)}); err == nil {
			t.Errorf("%s: decoded", params)
		}
	}
	if _, err := DecodeToolCall(&Frame{Method: MethodToolCall}); err == nil {
		t.Error("a tool call without params decoded")
	}
}
