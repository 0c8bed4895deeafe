package a2acall

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzEvents feeds the event-stream reader arbitrary bytes: it never panics,
// never yields an event over the size limit, and an event's data never holds
// a line end other than the newlines that join its data lines.
func FuzzEvents(f *testing.F) {
	for _, s := range []string{
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{}}\n\n",
		": comment\r\nevent: x\r\ndata: a\r\ndata: b\r\n\r\n",
		"data:one\n\ndata: two",
		"\r\r\n\n\ndata",
		"id: 1\nretry: 5\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		maxAnswer = 256
		defer func() { maxAnswer = MaxAnswer }()
		for data, err := range events(bytes.NewReader(in)) {
			if err != nil {
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("a reader over bytes failed: %v", err)
				}
				return
			}
			if len(data) > maxAnswer {
				t.Fatalf("an event of %d bytes passed the limit %d", len(data), maxAnswer)
			}
			if bytes.ContainsRune(data, '\r') && !bytes.Contains(in, []byte("\r")) {
				t.Fatalf("a carriage return from nowhere in %q", data)
			}
		}
	})
}

// FuzzDecode feeds the JSON-RPC answer decoder arbitrary bytes: it never
// panics, and it returns either a result or an error, never both or none.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"7","result":{"kind":"task"}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"no task"}}`,
		`{"jsonrpc":"2.0","id":"8","result":null}`,
		`{"id":null}`,
		`[1,2]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		res, err := decode("tasks/get", "7", in, false)
		if (err == nil) == (res == nil) {
			t.Fatalf("decode(%q) = %q, %v: want exactly one of a result and an error", in, res, err)
		}
	})
}
