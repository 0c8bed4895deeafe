package intelligence

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// A retried model call sends the same body again, whole, with its
// Content-Length (never chunked): each attempt reads the request's jsonBody
// from the start.
func TestRequestBodyRetriedWhole(t *testing.T) {
	var mu sync.Mutex
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
		if n == 1 { // the first attempt fails: the second reads the body again
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
