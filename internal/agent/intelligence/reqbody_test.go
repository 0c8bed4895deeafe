package intelligence

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/agentd/agentd/api"
)

// A model call does not hold its request's bytes while it waits on the
// answer: once written, the body is garbage (a retry encodes the request
// again, with the same bytes and its Content-Length). Before, the encoded
// request stayed referenced for the whole call, about 170 KiB of a child
// waiting with figure 9's 64 KiB conversation.
func TestRequestBodyLetGoWhileWaiting(t *testing.T) {
	var mu sync.Mutex
	var sent []weak.Pointer[byte]
	old := marshalRequest
	marshalRequest = func(v any) ([]byte, error) {
		b, err := old(v)
		if err == nil && len(b) > 0 {
			mu.Lock()
			sent = append(sent, weak.Make(&b[0]))
			mu.Unlock()
		}
		return b, err
	}
	t.Cleanup(func() { marshalRequest = old })

	type seen struct {
		body   string
		length int64
		chunks []string
	}
	var got []seen
	held, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{string(b), r.ContentLength, r.TransferEncoding})
		n := len(got)
		mu.Unlock()
		if n == 1 { // the first attempt fails: the second is encoded again
			answerWith(http.StatusServiceUnavailable, `{"error":{"message":"busy"}}`)(w, r)
			return
		}
		close(held)
		<-release
		answerWith(http.StatusOK, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"done"}}]}`)(w, r)
	})
	t.Cleanup(free) // before the server's Close, which waits for the handler
	m, err := New(api.Intelligence{Endpoint: srv.endpoint(), Model: "m", Retries: intPtr(2), RetryBackoff: api.Duration(time.Millisecond)}, "")
	if err != nil {
		t.Fatal(err)
	}
	conversation := strings.Repeat("the earlier turns ", 64<<10/18)
	done := make(chan error, 1)
	go func() {
		resp, err := m.Complete(context.Background(), &Request{System: "s", Messages: []Message{{Role: RoleUser, Content: conversation}}})
		if err == nil && resp.Content != "done" {
			err = io.ErrUnexpectedEOF
		}
		done <- err
	}()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the call ended before its answer was held: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		mu.Lock()
		kept := 0
		for _, p := range sent {
			if p.Value() != nil {
				kept++
			}
		}
		n := len(sent)
		mu.Unlock()
		if kept == 0 && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting on its answer, the call still holds %d of the %d request bodies it encoded", kept, n)
		}
		time.Sleep(time.Millisecond)
	}
	free()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].body != got[1].body || !strings.Contains(got[1].body, conversation) {
		t.Fatalf("the retry's body differs from the first attempt's (%d requests)", len(got))
	}
	for i, s := range got {
		if s.length != int64(len(s.body)) || len(s.chunks) != 0 {
			t.Errorf("attempt %d: Content-Length %d for %d bytes, transfer encoding %v", i+1, s.length, len(s.body), s.chunks)
		}
	}
}
