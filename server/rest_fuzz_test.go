package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzREST sends arbitrary requests to the HTTP+JSON binding: a route (by
// its index in the method list), a path, a query and a body. The front never
// panics, and every answer is a success in JSON, an event stream, or an
// error with the binding's error body whose code is the HTTP status. The seed
// corpus is in testdata/fuzz/FuzzREST.
func FuzzREST(f *testing.F) {
	f.Add(uint8(1), "/message:send", "", []byte(`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]}}`))
	f.Add(uint8(0), "/tasks", "pageSize=2&status=working", []byte(nil))
	f.Add(uint8(1), "/tasks/t:cancel", "", []byte(`{"id":"t"}`))
	h := testHandler(1 << 16)
	methods := []string{"GET", "POST", "DELETE", "PUT"}
	f.Fuzz(func(t *testing.T, m uint8, path, query string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			return
		}
		u := &url.URL{Path: path, RawQuery: query}
		req, err := http.NewRequest(methods[int(m)%len(methods)], "http://127.0.0.1"+u.String(), bytes.NewReader(body))
		if err != nil {
			return
		}
		switch req.URL.Path {
		case "/", "/healthz", "/readyz", "/.well-known/agent-card.json", "/.well-known/agent.json":
			return // the other routes of the listener
		}
		req.Header.Set("Content-Type", "application/json")
		if len(body) == 0 {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		ct := rec.Header().Get("Content-Type")
		switch {
		case ct == "text/event-stream":
			return
		case rec.Code == http.StatusOK:
			if ct != "application/json" || !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("200 with %q: %q", ct, rec.Body.Bytes())
			}
			return
		}
		var eb struct {
			Error struct {
				Code    int    `json:"code"`
				Status  string `json:"status"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if ct != "application/json" || json.Unmarshal(rec.Body.Bytes(), &eb) != nil || eb.Error.Code != rec.Code || eb.Error.Status == "" {
			t.Fatalf("%s %s: HTTP %d %q: %q", req.Method, req.URL, rec.Code, ct, rec.Body.Bytes())
		}
	})
}
