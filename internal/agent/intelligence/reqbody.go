package intelligence

import (
	"context"
	"io"
	"net"
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

// newTransport is http.DefaultTransport's clone whose connections are
// bodyConns.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &bodyConn{Conn: c}, nil
	}
	return t
}

// bodyConnBuf is the size of a bodyConn's buffer: twice net/http's own
// write buffer, where a call to a local server spends as much CPU as it
// did with the 32 KiB buffer of every request (BenchmarkFigure9Call: 4
// KiB took about 25% more, in twice as many writes).
const bodyConnBuf = 8 << 10

// bodyConn is a connection to a model's endpoint that writes a request's
// body (a jsonBody's reader) onto itself through a buffer of its own
// (bodyConnBuf), made at its first request and kept for the next. net/http
// hands a body with a Content-Length to the connection's ReadFrom as an
// io.LimitedReader (past the first bytes, which go out with the headers);
// a *net.TCPConn copies from a reader it cannot splice or sendfile through
// a 32 KiB buffer made for each request (net.genericReadFrom): 64 KiB of a
// figure-9 child's two calls, all of it kept while the child waits on its
// answer (a waiting child does not collect). Any other reader goes to the
// connection's own ReadFrom as before. Over TLS net/http writes to the
// tls.Conn above this connection, which copies through a buffer of a
// request's own as before: this one is not used.
type bodyConn struct {
	net.Conn
	buf []byte
}

// ReadFrom writes r onto the connection: a jsonBody's reader through the
// connection's buffer, anything else as the connection itself would.
func (c *bodyConn) ReadFrom(r io.Reader) (int64, error) {
	lr, ok := r.(*io.LimitedReader)
	if !ok {
		return io.Copy(c.Conn, r)
	}
	if _, ok := lr.R.(*bodyReader); !ok {
		return io.Copy(c.Conn, r)
	}
	if c.buf == nil {
		c.buf = make([]byte, bodyConnBuf)
	}
	return copyThrough(c.Conn, lr, c.buf)
}

// copyThrough copies r to w through buf, as io.CopyBuffer would without
// asking either side to do it (io.CopyBuffer would hand a bodyConn's copy
// back to the connection's ReadFrom, a *bodyReader's to its WriteTo).
func copyThrough(w io.Writer, r io.Reader, buf []byte) (int64, error) {
	var n int64
	for {
		k, err := r.Read(buf)
		if k > 0 {
			m, werr := w.Write(buf[:k])
			n += int64(m)
			if werr != nil {
				return n, werr
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
