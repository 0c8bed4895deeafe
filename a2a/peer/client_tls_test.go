package peer

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A peer is part of the mesh: its client refuses a server that cannot speak
// TLS 1.3, as every agentd listener does.
func TestPeerClientRequiresTLS13(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.TLS = &tls.Config{MaxVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	hc, err := DefaultClient(Config{Name: "old", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	// The test server's certificate is trusted; only the version may fail.
	tr := hc.Transport.(*http.Transport)
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	tr.TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	_, err = hc.Get(srv.URL)
	if err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("a TLS 1.2-only peer: %v, want a protocol version failure", err)
	}
}
