package intelligence

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// marshalRequest encodes a request's JSON body (json.Marshal; a test
// watches the bytes it returns).
var marshalRequest = json.Marshal

// bodies hands each attempt of one model call its request body: the first
// attempt the bytes Complete encoded (and checked) before trying, a later one
// (a retry, or net/http rewinding a request on a stale connection) the same
// value encoded again. Nothing keeps the bytes but the attempt's request
// body (sentBody), so once written they are garbage while the call waits on
// its answer: figure 9's 64 KiB conversation is a request of about 170 KiB a
// waiting child no longer holds.
type bodies struct {
	mu    sync.Mutex
	first []byte
	v     any
}

// next returns the next attempt's body.
func (b *bodies) next() ([]byte, error) {
	b.mu.Lock()
	first := b.first
	b.first = nil
	b.mu.Unlock()
	if first != nil {
		return first, nil
	}
	return marshalRequest(b.v)
}

// newPost returns a POST to url under ctx whose body is the next of bs, with
// its Content-Length, and which net/http can rewind (GetBody: encoded again).
func newPost(ctx context.Context, url string, bs *bodies) (*http.Request, error) {
	body, err := bs.next()
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &sentBody{b: body})
	if err != nil {
		return nil, err
	}
	hr.ContentLength = int64(len(body))
	hr.GetBody = func() (io.ReadCloser, error) {
		b, err := marshalRequest(bs.v)
		if err != nil {
			return nil, err
		}
		return &sentBody{b: b}, nil
	}
	return hr, nil
}

// sentBody is a request body that lets go of its bytes once they are read to
// the end or it is closed (net/http keeps a request, and its body, until the
// answer comes). Read and Close may come from different goroutines.
type sentBody struct {
	mu sync.Mutex
	b  []byte
}

func (s *sentBody) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.b) == 0 {
		s.b = nil
		return 0, io.EOF
	}
	n := copy(p, s.b)
	if s.b = s.b[n:]; len(s.b) == 0 {
		s.b = nil
	}
	return n, nil
}

func (s *sentBody) Close() error {
	s.mu.Lock()
	s.b = nil
	s.mu.Unlock()
	return nil
}
