package server

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"testing"
)

// BenchmarkMessageSend is one blocking message/send through the front
// (origin check, authentication, JSON-RPC validation and dispatch, the engine
// and its store, the encoding of the task) with an executor that completes at
// once.
func BenchmarkMessageSend(b *testing.B) {
	h := testHandler(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-%d","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`, i, i)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/", bytes.NewReader(body)))
		if rec.Code != 200 || !bytes.Contains(rec.Body.Bytes(), []byte(`"state":"completed"`)) {
			b.Fatalf("HTTP %d: %s", rec.Code, rec.Body.Bytes())
		}
	}
}
