package bearer

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// authServer answers with the Authorization header it got.
func authServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Header.Get("Authorization")))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 256)
	n, _ := resp.Body.Read(b)
	return string(b[:n])
}

func TestTransportScopesTheTokenToItsOrigin(t *testing.T) {
	mine, other := authServer(t), authServer(t)
	u, _ := url.Parse(mine.URL)
	c := &http.Client{Transport: &Transport{Token: Static("s3cret"), Scheme: u.Scheme, Host: u.Host}}
	if got := get(t, c, mine.URL); got != "Bearer s3cret" {
		t.Fatalf("own origin got %q", got)
	}
	if got := get(t, c, other.URL); got != "" {
		t.Fatalf("another origin got %q", got)
	}
	everywhere := &http.Client{Transport: &Transport{Token: Static("t")}}
	if got := get(t, everywhere, other.URL); got != "Bearer t" {
		t.Fatalf("unscoped transport sent %q", got)
	}
}

func TestFileIsReadAgainWhenItChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(" one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok := File(path)
	if v, err := tok(); err != nil || v != "one" {
		t.Fatalf("first read: %q %v", v, err)
	}
	if err := os.WriteFile(path, []byte("second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	os.Chtimes(path, later, later) // a different size already tells; the time too
	if v, err := tok(); err != nil || v != "second" {
		t.Fatalf("after rotation: %q %v", v, err)
	}
	os.WriteFile(path, []byte("a\nb\n"), 0o600)
	if _, err := tok(); err == nil {
		t.Fatal("a two-line token file was accepted")
	}
	srv := authServer(t)
	os.Remove(path)
	c := &http.Client{Transport: &Transport{Token: tok}}
	if _, err := c.Get(srv.URL); err == nil {
		t.Fatal("a request went out without its token")
	}
}
