package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// The card, at both of its paths, carries Cache-Control with max-age, a strong
// ETag and Last-Modified (A2A 1.0 §8.6.1), and a conditional GET naming the
// ETag, or not older than Last-Modified, is answered 304 with no body; another
// ETag gets the card.
func TestCardCaching(t *testing.T) {
	srv := httptest.NewServer(testHandler(0))
	defer srv.Close()
	get := func(path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(body)
	}
	for _, path := range []string{"/.well-known/agent-card.json", "/.well-known/agent.json"} {
		resp, card := get(path)
		if resp.StatusCode != 200 || !strings.Contains(card, `"supportedInterfaces"`) {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, card)
		}
		if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age="+strconv.Itoa(CardMaxAge)) {
			t.Errorf("%s: Cache-Control %q, want max-age=%d", path, cc, CardMaxAge)
		}
		etag := resp.Header.Get("ETag")
		if len(etag) < 3 || etag[0] != '"' || etag[len(etag)-1] != '"' {
			t.Fatalf("%s: ETag %q, want a strong entity tag", path, etag)
		}
		lm := resp.Header.Get("Last-Modified")
		if _, err := http.ParseTime(lm); err != nil {
			t.Errorf("%s: Last-Modified %q: %v", path, lm, err)
		}
		for _, cond := range [][]string{
			{"If-None-Match", etag},
			{"If-None-Match", `"other", W/` + etag},
			{"If-None-Match", "*"},
			{"If-Modified-Since", lm},
		} {
			resp, body := get(path, cond...)
			if resp.StatusCode != http.StatusNotModified || body != "" {
				t.Errorf("%s with %s: %s: %d %q, want 304 and no body", path, cond[0], cond[1], resp.StatusCode, body)
			}
			if resp.Header.Get("ETag") != etag || resp.Header.Get("Cache-Control") == "" {
				t.Errorf("%s with %s: 304 without the ETag and Cache-Control: %v", path, cond[0], resp.Header)
			}
		}
		// A stale ETag wins over a current If-Modified-Since (RFC 9110 §13.2.2).
		resp, body := get(path, "If-None-Match", `"stale"`, "If-Modified-Since", lm)
		if resp.StatusCode != 200 || body != card {
			t.Errorf("%s with a stale ETag: %d %q, want 200 and the card", path, resp.StatusCode, body)
		}
	}
}
