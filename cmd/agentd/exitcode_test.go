package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/tlsconfig"
)

// A bad address or URL is bad config: exit 2 naming the setting, before
// anything starts (it was exit 1 from the listen or the request, not naming
// the flag).
func TestBadAddressIsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"serve", "--listen", "127.0.0.1:99999"}, "--listen"},
		{[]string{"serve", "--health-listen", "127.0.0.1:-1"}, "--health-listen"},
		{[]string{"serve", "--metrics-addr", "127.0.0.1:70000"}, "--metrics-addr"},
		{[]string{"send", "--to", "127.0.0.1:8080", "hi"}, "--to"},
		{[]string{"send", "--to", "localhost:8080", "hi"}, "--to"},
		{[]string{"ctl", "a2a.Tree", "--to", "127.0.0.1:8080"}, "--to"},
		{[]string{"ctl", "a2a.Tree", "--to", "ftp://127.0.0.1:8080/"}, "--to"},
	} {
		var stderr bytes.Buffer
		code := exitCode(run(context.Background(), tc.args, &stderr, &stderr), &stderr)
		if code != api.ExitUsage || !strings.Contains(stderr.String(), tc.flag) {
			t.Errorf("%v: exit %d\n%s", tc.args, code, stderr.String())
		}
	}
}

// A server whose SPIFFE ID is not --server-id's is refused with both IDs
// named: the one presented and the one expected (it said "server X:
// unexpected ID X").
func TestWrongServerIDNamesBoth(t *testing.T) {
	dir := t.TempDir()
	set, err := tlsconfig.WriteDevSet(dir, spiffeid.RequireTrustDomainFromString("example.org"), time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconfig.NewFileSource(tlsconfig.Files{
		Cert: filepath.Join(dir, tlsconfig.DevServerCert), Key: filepath.Join(dir, tlsconfig.DevServerKey), Bundle: filepath.Join(dir, tlsconfig.DevBundle),
	}, discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Listener = tls.NewListener(srv.Listener, tlsconfig.ServerConfig(src))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	defer srv.Close()
	url := "https://" + srv.Listener.Addr().String() + "/"

	c := clientConfig{
		To: url, Timeout: time.Minute, Bundle: filepath.Join(dir, tlsconfig.DevBundle),
		Cert: filepath.Join(dir, tlsconfig.DevPeerCert), Key: filepath.Join(dir, tlsconfig.DevPeerKey),
		ServerID: set.Operator.String(),
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	hc, closeFn, err := c.httpClient(context.Background(), discardLog())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	resp, err := hc.Get(url)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a server with another ID was accepted")
	}
	want := "server " + set.Server.String() + ": --server-id expects " + set.Operator.String()
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
	hc.CloseIdleConnections()
}
