package intelligence

import (
	"context"
	"io"
	"net/http"
)

// bodySource gives each attempt of a model call its request body, and
// net/http a fresh one when it rewinds a request (GetBody): a jsonBody,
// which every attempt reads from the start. Nothing encodes the request
// whole, so a call waiting on its answer holds no copy of its conversation
// but the turns themselves (before, the encoded request stayed referenced
// for the whole call: about 170 KiB of a child waiting with figure 9's 64 KiB
// conversation).
type bodySource interface {
	open() (io.ReadCloser, int64, error)
}

// newPost returns a POST to url under ctx whose body is read from bs, with
// its Content-Length, and which net/http can rewind (GetBody: the body
// again).
func newPost(ctx context.Context, url string, bs bodySource) (*http.Request, error) {
	body, n, err := bs.open()
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		return nil, err
	}
	hr.ContentLength = n
	hr.GetBody = func() (io.ReadCloser, error) {
		b, _, err := bs.open()
		return b, err
	}
	return hr, nil
}
