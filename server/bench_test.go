package server

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/admit"
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
		h.ServeHTTP(rec, newPost(bytes.NewReader(body)))
		if rec.Code != 200 || !bytes.Contains(rec.Body.Bytes(), []byte(`"state":"completed"`)) {
			b.Fatalf("HTTP %d: %s", rec.Code, rec.Body.Bytes())
		}
	}
}

// BenchmarkMessageSendAdmission is BenchmarkMessageSend with and without
// admission control (bounds that never queue, as a 1 GiB pod's at one
// request at a time): the cost admission adds to a send.
func BenchmarkMessageSendAdmission(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "admission=off"
		var opts []tasks.EngineOption
		if on {
			name = "admission=on"
			d := admit.Derive(1<<30, 2)
			c, err := admit.New(admit.Config{Bounds: d.Bounds, Ceiling: d.Ceiling})
			if err != nil {
				b.Fatal(err)
			}
			opts = append(opts, tasks.WithAdmission(c, admit.Policy{}))
		}
		b.Run(name, func(b *testing.B) {
			engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil, opts...)
			h := Handler(Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})})
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"message/send","params":{"message":{"kind":"message","messageId":"m-%d","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`, i, i)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, newPost(bytes.NewReader(body)))
				if rec.Code != 200 || !bytes.Contains(rec.Body.Bytes(), []byte(`"state":"completed"`)) {
					b.Fatalf("HTTP %d: %s", rec.Code, rec.Body.Bytes())
				}
			}
		})
	}
}
