package server

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/telemetry"
)

// Every refusal of a caller closes its connection after the answer, as
// docs/security.md says (issue 29.4): the 401s, the 403 of a role (/metrics,
// the console) and the 403 of an Origin carry Connection: close and the
// client then reads EOF; a 401 answered while the request's body is still
// arriving closes at once too, not at the body deadline (a minute here).
// A raw TCP client on 127.0.0.1 sends each request and reads the answer.
func TestRefusalsCloseTheConnection(t *testing.T) {
	tokens, err := ParseTokens([]byte(peerToken + " peer ci\n"))
	if err != nil {
		t.Fatal(err)
	}
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "console") })
	h := Handler(Config{Auth: &Auth{Tokens: tokens}, Metrics: telemetry.NewMetrics(), Console: console})
	addr, _ := serveLimited(t, ConnLimits{BodyTimeout: time.Minute}, h)
	bearer := "Authorization: Bearer " + peerToken + "\r\n"
	for _, tc := range []struct {
		name string
		req  string // the request's head and as much of its body as is sent
		want int
	}{
		{"no credentials", "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 401},
		{"no credentials, the body still arriving", "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", 401},
		{"an unknown token, the body still arriving", "POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong-token-0123456789\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", 401},
		{"a peer asking for /metrics", "GET /metrics HTTP/1.1\r\nHost: x\r\n" + bearer + "\r\n", 403},
		{"a peer asking for the console", "GET /ui/ HTTP/1.1\r\nHost: x\r\n" + bearer + "\r\n", 403},
		{"a foreign Origin", "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: x\r\nOrigin: https://evil.example\r\n\r\n", 403},
		{"a foreign Origin, the body still arriving", "POST / HTTP/1.1\r\nHost: x\r\nOrigin: https://evil.example\r\n" + bearer + "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", 403},
	} {
		c := dial(t, addr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, tc.req); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || !resp.Close {
			t.Errorf("%s: HTTP %d, Connection: close %v; want %d and close", tc.name, resp.StatusCode, resp.Close, tc.want)
		}
		// The server closes the connection: EOF (or a reset), well before the
		// body deadline and the idle timeout (a minute each).
		if !closedByPeer(c, 5*time.Second) {
			t.Errorf("%s: the connection is still open 5s after the answer", tc.name)
		}
		c.Close()
	}
	// A request that is served keeps its connection.
	c := dial(t, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Close {
		t.Error("a served request's connection was closed")
	}
}

// Over TLS too: a 401 answered while the body is still arriving closes the
// connection at once (the read deadline moved to now ends the TLS reads as
// it does the plain ones).
func TestRefusalClosesTheTLSConnection(t *testing.T) {
	tokens, err := ParseTokens([]byte(peerToken + " peer ci\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := ConnLimits{BodyTimeout: time.Minute}
	h := Handler(Config{Auth: &Auth{Tokens: tokens}})
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = l.Server(h, nil)
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "example.com", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Fatalf("HTTP %d, Connection: close %v", resp.StatusCode, resp.Close)
	}
	if !closedByPeer(c, 5*time.Second) {
		t.Error("the TLS connection is still open 5s after the 401")
	}
}
