// Package bearer adds a bearer token to outgoing HTTP requests: Transport, an
// http.RoundTripper that sets "Authorization: Bearer TOKEN", optionally only
// on requests to one origin, with the token from a fixed string (Static) or a
// file re-read when it changes (File).
package bearer

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/secretfile"
)

// Transport sends each request through Base with the bearer token of Token
// in its Authorization header. With Scheme and Host set, only requests to
// that origin get the token; any other request (a redirect elsewhere) goes
// without it. The request given is not modified. It is safe for concurrent
// use once its fields are set; a zero Base is http.DefaultTransport.
type Transport struct {
	Base  http.RoundTripper
	Token func() (string, error)
	// Scheme and Host, if set, are the only origin given the token.
	Scheme, Host string
}

// RoundTrip implements http.RoundTripper. A token that cannot be read fails
// the request.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	if t.Host != "" && (r.URL.Scheme != t.Scheme || r.URL.Host != t.Host) {
		return base.RoundTrip(r)
	}
	tok, err := t.Token()
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return base.RoundTrip(r)
}

// Static returns a token source that always returns token.
func Static(token string) func() (string, error) {
	return func() (string, error) { return token, nil }
}

// File returns a token source that reads the token from path: one non-empty
// line, surrounding white space trimmed. The file is read again when its
// modification time or size changes (a rotated token applies to the next
// request). The source is safe for concurrent use.
func File(path string) func() (string, error) {
	f := &file{path: path}
	return f.token
}

type file struct {
	path string

	mu    sync.Mutex // guards mod, size, value
	mod   time.Time
	size  int64
	value string
}

func (f *file) token() (string, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return "", fmt.Errorf("bearer token file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.value != "" && fi.ModTime().Equal(f.mod) && fi.Size() == f.size {
		return f.value, nil
	}
	b, err := secretfile.Read(f.path) // refused when its group or others may open it
	if err != nil {
		return "", fmt.Errorf("bearer token file: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" || strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("bearer token file %s: want one non-empty line", f.path)
	}
	f.mod, f.size, f.value = fi.ModTime(), fi.Size(), v
	return v, nil
}
