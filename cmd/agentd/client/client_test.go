package client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/cmd/agentd/internal/cli/clitest"
	"github.com/agentd/agentd/tlsconfig"
)

func TestClientValidate(t *testing.T) {
	parseSendArgs := func() (*sendConfig, error) {
		return parseSend([]string{"--to", "https://agentd.example/", "--tls-bundle", "bundle.pem", "--server-id", "spiffe://example.org/agentd", "hi"}, io.Discard)
	}
	clitest.CheckValidate(t, parseSendArgs, (*sendConfig).Validate, []clitest.ValidateCase[sendConfig]{
		{"--to", func(c *sendConfig) { c.Client.To = "" }},
		{"--timeout", func(c *sendConfig) { c.Client.Timeout = -time.Second }},
		{"TEXT", func(c *sendConfig) { c.Text = "  " }},
		{"--server-id", func(c *sendConfig) { c.Client.ServerID = "" }},
		{"--server-id", func(c *sendConfig) { c.Client.ServerID = "not-an-id" }},
		{"--tls-bundle", func(c *sendConfig) { c.Client.Bundle = "" }},
		{"--tls-cert", func(c *sendConfig) { c.Client.Cert = "cert.pem" }},
		{"--tls-key", func(c *sendConfig) { c.Client.Key = "key.pem" }},
		{"--spiffe-socket", func(c *sendConfig) { c.Client.Bundle, c.Client.SPIFFESocket = "", "http://nope" }},
		// A credential goes only to a pinned server: a client SVID or a
		// token over https needs --server-id (or the explicit opt-out), a
		// token over plain http a loopback address.
		{"--insecure-any-server-id", func(c *sendConfig) { c.Client.Cert, c.Client.Key, c.Client.ServerID = "cert.pem", "key.pem", "" }},
		{"--insecure-any-server-id", func(c *sendConfig) {
			c.Client.Bundle, c.Client.SPIFFESocket, c.Client.ServerID = "", "unix:///tmp/agent.sock", ""
		}},
		{"--token-file", func(c *sendConfig) { c.Client.To, c.Client.TokenFile = "http://agentd.example/", "token" }},
	})
	// The opt-out and loopback pass.
	for _, mod := range []func(c *sendConfig){
		func(c *sendConfig) {
			c.Client.Cert, c.Client.Key, c.Client.ServerID, c.Client.AnyServerID = "cert.pem", "key.pem", "", true
		},
		func(c *sendConfig) { c.Client.To, c.Client.TokenFile = "http://127.0.0.1:8080/", "token" },
	} {
		c, err := parseSendArgs()
		if err != nil {
			t.Fatal(err)
		}
		mod(c)
		if err := c.Validate(); err != nil {
			t.Errorf("refused: %v", err)
		}
	}
	parseCtlArgs := func() (*ctlConfig, error) {
		return parseCtl([]string{"caps", "--to", "http://127.0.0.1:1"}, io.Discard, io.Discard)
	}
	clitest.CheckValidate(t, parseCtlArgs, (*ctlConfig).Validate, []clitest.ValidateCase[ctlConfig]{
		{"--to", func(c *ctlConfig) { c.Client.To = "" }},
		{"--timeout", func(c *ctlConfig) { c.Client.Timeout = 0 }},
		{"--tls-bundle", func(c *ctlConfig) { c.Client.To = "https://127.0.0.1:1" }},
	})
	// --watch runs until interrupted unless --timeout is given; it prints
	// the stream, not JSON.
	parseWatch := func() (*ctlConfig, error) {
		return parseCtl([]string{"tree", "--watch", "--to", "http://127.0.0.1:1"}, io.Discard, io.Discard)
	}
	clitest.CheckValidate(t, parseWatch, (*ctlConfig).Validate, []clitest.ValidateCase[ctlConfig]{
		{"--json", func(c *ctlConfig) { c.JSON = true }},
	})
	if c, _ := parseWatch(); !c.Client.Unbounded || c.Client.Timeout != 0 {
		t.Errorf("--watch without --timeout: %+v", c.Client)
	}
	if c, err := parseCtl([]string{"tree", "--watch", "--timeout", "2s", "--to", "http://127.0.0.1:1"}, io.Discard, io.Discard); err != nil || c.Client.Unbounded || c.Client.Timeout != 2*time.Second {
		t.Errorf("--watch --timeout 2s: %+v %v", c, err)
	}
	if _, err := parseCtl([]string{"caps", "--watch", "--to", "http://127.0.0.1:1"}, io.Discard, io.Discard); err == nil {
		t.Error("--watch is for a2a.Tree only")
	}
}

// Validate reads no file: a --token-file that is missing passes it, and the
// build's step that reads it fails, as bad config naming the setting.
func TestTokenFileIsReadByTheBuild(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	send, err := parseSend([]string{"--to", "http://127.0.0.1:1", "--token-file", missing, "hi"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := send.Validate(); err != nil {
		t.Fatalf("Validate read the token file: %v", err)
	}
	_, closeFn, err := send.Client.httpClient(context.Background(), slog.New(slog.DiscardHandler))
	closeFn()
	var ee *cli.ExitError
	if !errors.As(err, &ee) || ee.Code != api.ExitUsage || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf("the client token: %v; want exit 2 naming --token-file", err)
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
	}, slog.New(slog.DiscardHandler))
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
	hc, closeFn, err := c.httpClient(context.Background(), slog.New(slog.DiscardHandler))
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

// A flag of send or ctl beats its environment variable: a malformed value of
// the variable changes nothing when the flag is given.
func TestEveryFlagBeatsItsEnvironment(t *testing.T) {
	parsers := map[string]func(args []string) (any, error){
		"send": func(args []string) (any, error) {
			return cli.Validated(parseSend(append(args, "x"), io.Discard))
		},
		"ctl": func(args []string) (any, error) {
			return cli.Validated(parseCtl(append([]string{"a2a.Tree"}, args...), io.Discard, io.Discard))
		},
	}
	if n := clitest.FlagsBeatTheirEnvironment(t, parsers); n < 15 {
		t.Errorf("only %d flags with an environment variable", n)
	}
}
