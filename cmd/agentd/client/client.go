package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"

	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/bearer"
	"github.com/agentd/agentd/internal/loopback"
	"github.com/agentd/agentd/internal/secretfile"
	"github.com/agentd/agentd/tlsconfig"
)

// clientConfig is the server and the credentials of agentd's clients (send,
// ctl).
type clientConfig struct {
	To                string // --to, the server's base URL
	Timeout           time.Duration
	Unbounded         bool   // no --timeout: a watch runs until interrupted
	Cert, Key, Bundle string // --tls-cert, --tls-key, --tls-bundle
	SPIFFESocket      string
	TokenFile         string
	ServerID          string
	// AnyServerID is --insecure-any-server-id: present credentials to a
	// server of the trust domain without pinning its SPIFFE ID.
	AnyServerID bool
}

// addClientFlags defines --to (from toEnv), --timeout and the credentials.
func addClientFlags(f *cli.Flags, c *clientConfig, toEnv, toUsage string, timeout time.Duration) {
	f.EnvString(&c.To, "to", toEnv, "", toUsage)
	f.DurationVar(&c.Timeout, "timeout", timeout, "give up after this long")
	f.EnvString(&c.Cert, "tls-cert", "AGENT_TLS_CERT", "", "PEM file: the client's X.509 SVID, for mTLS")
	f.EnvString(&c.Key, "tls-key", "AGENT_TLS_KEY", "", "PEM file: the client SVID's private key")
	f.EnvString(&c.Bundle, "tls-bundle", "AGENT_TLS_BUNDLE", "", "PEM file: the trust bundle that verifies the server")
	f.EnvString(&c.SPIFFESocket, "spiffe-socket", "SPIFFE_ENDPOINT_SOCKET", "", "SPIFFE Workload API address: the client's SVID and the bundles")
	f.EnvString(&c.TokenFile, "token-file", "AGENT_TOKEN_FILE", "", "file holding a bearer token (a static token or a JWT-SVID)")
	f.EnvString(&c.ServerID, "server-id", "AGENT_SERVER_ID", "", "the SPIFFE ID the server must present; required over https when a client certificate or --token-file is presented")
	// No environment variable: an opt-out of a security check is given on
	// the command line each time, not left in an environment.
	f.BoolVar(&c.AnyServerID, "insecure-any-server-id", false, "present the credentials to any server ID of the trust domain, unpinned (a same-domain impostor gets them)")
}

// clientTLS is how a client proves itself and checks the server over https.
type clientTLS int

const (
	clientPlain    clientTLS = iota // http: no TLS
	clientWorkload                  // the Workload API's SVID and bundles
	clientFiles                     // --tls-cert/--tls-key/--tls-bundle
	clientBundle                    // --tls-bundle alone: server-authenticated TLS
)

// mode picks the TLS mode for url (checked by validate).
func (c *clientConfig) mode(url string) clientTLS {
	files := c.Cert != "" || c.Key != ""
	switch {
	case !strings.HasPrefix(url, "https://"):
		return clientPlain
	case c.SPIFFESocket != "" && !files:
		return clientWorkload
	case files:
		return clientFiles
	default:
		return clientBundle
	}
}

// validate checks the settings and names the bad one. TLS settings matter
// only for an https --to.
func (c *clientConfig) validate() error {
	if c.To == "" {
		return errors.New("--to is required")
	}
	if c.Timeout <= 0 && !c.Unbounded {
		return fmt.Errorf("--timeout must be a positive duration (got %s)", c.Timeout)
	}
	url := c.To
	if u, err := neturl.Parse(url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--to %q: want an http:// or https:// URL, such as http://127.0.0.1:8080", url)
	}
	if c.ServerID != "" {
		if _, err := spiffeid.FromString(c.ServerID); err != nil {
			return fmt.Errorf("--server-id: %v", err)
		}
	}
	switch c.mode(url) {
	case clientWorkload:
		if _, err := tlsconfig.WorkloadAddress(c.SPIFFESocket); err != nil {
			return fmt.Errorf("--spiffe-socket: %v", err)
		}
	case clientFiles:
		if c.Cert == "" || c.Key == "" || c.Bundle == "" {
			return errors.New("--tls-cert, --tls-key and --tls-bundle go together")
		}
	case clientBundle:
		if c.Bundle == "" {
			return fmt.Errorf("%s is https: give --tls-bundle (and --tls-cert/--tls-key for mTLS) or --spiffe-socket", url)
		}
		if c.ServerID == "" {
			return errors.New("--tls-bundle without a client SVID needs --server-id (the trust domain to verify the server in)")
		}
	}
	return c.checkPinned()
}

// checkPinned refuses to present a credential to a server that is not
// pinned: over https, a client SVID (mTLS) or a bearer token goes only to
// the server --server-id names, unless --insecure-any-server-id says any
// server of the trust domain will do; over plain http (no server identity at
// all), a bearer token goes only to a loopback address.
func (c *clientConfig) checkPinned() error {
	switch m := c.mode(c.To); {
	case m == clientPlain:
		if c.TokenFile != "" && !loopback.URL(c.To) {
			return fmt.Errorf("--token-file over plain http to %s: a bearer token would cross the network in the clear; use https (with --server-id)", c.To)
		}
	case c.ServerID != "" || c.AnyServerID:
	case m == clientWorkload || m == clientFiles:
		return errors.New("--server-id is required to present a client certificate: pin the server's SPIFFE ID (spiffe://TRUST-DOMAIN/PATH), or pass --insecure-any-server-id to accept any ID of the trust domain")
	case c.TokenFile != "":
		return errors.New("--server-id is required to present a bearer token: pin the server's SPIFFE ID, or pass --insecure-any-server-id to accept any ID of the trust domain")
	}
	return nil
}

// dial bounds ctx by --timeout (unless Unbounded) and builds the HTTP client for --to. done
// releases both; it is never nil.
func (c *clientConfig) dial(ctx context.Context, stderr io.Writer) (_ context.Context, _ *http.Client, done func(), err error) {
	var cancel context.CancelFunc
	if c.Unbounded {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
	}
	hc, closeCreds, err := c.httpClient(ctx, newClientLogger(stderr))
	return ctx, hc, func() { closeCreds(); cancel() }, err
}

// httpClient builds the HTTP client for --to: TLS from the SPIFFE settings for
// https, and the bearer token on every request. No total timeout: it would
// cut long streams; ctx bounds each call instead. closeFn releases a Workload
// API connection; it is never nil.
func (c *clientConfig) httpClient(ctx context.Context, log *slog.Logger) (hc *http.Client, closeFn func(), err error) {
	closeFn = func() {}
	var token string
	if c.TokenFile != "" {
		if token, err = secretfile.Token(c.TokenFile); err != nil {
			return nil, closeFn, cli.UsageError("--token-file: %v", err)
		}
	}
	var authorize tlsconfig.Authorizer
	var serverTD spiffeid.TrustDomain
	if c.ServerID != "" {
		id, err := spiffeid.FromString(c.ServerID)
		if err != nil {
			return nil, closeFn, cli.UsageError("--server-id: %v", err)
		}
		authorize, serverTD = authorizeServerID(id), id.TrustDomain()
	}
	// memberOfOwn is the default authorization: any ID of the client's own
	// trust domain.
	memberOfOwn := func(src tlsconfig.Source) tlsconfig.Authorizer {
		if authorize != nil {
			return authorize
		}
		own, _ := tlsconfig.OwnID(src)
		return spiffetls.AuthorizeMemberOf(own.TrustDomain())
	}
	var tlsCfg *tls.Config
	switch c.mode(c.To) {
	case clientWorkload:
		src, err := tlsconfig.NewWorkloadSource(c.SPIFFESocket, log)
		if err != nil {
			return nil, closeFn, cli.UsageError("--spiffe-socket: %v", err)
		}
		closeFn = func() { src.Close() }
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = tlsconfig.WaitReady(wctx, src)
		cancel()
		if err != nil {
			return nil, closeFn, fmt.Errorf("workload api %s: %w", c.SPIFFESocket, err)
		}
		tlsCfg = tlsconfig.ClientConfig(src, src, memberOfOwn(src))
	case clientFiles:
		src, err := tlsconfig.NewFileSource(tlsconfig.Files{Cert: c.Cert, Key: c.Key, Bundle: c.Bundle}, log)
		if err != nil {
			return nil, closeFn, cli.UsageError("--tls-cert/--tls-key/--tls-bundle: %v", err)
		}
		tlsCfg = tlsconfig.ClientConfig(src, src, memberOfOwn(src))
	case clientBundle:
		bs, err := tlsconfig.NewBundleSource(serverTD, c.Bundle)
		if err != nil {
			return nil, closeFn, cli.UsageError("--tls-bundle: %v", err)
		}
		tlsCfg = tlsconfig.ClientConfig(nil, bs, authorize)
	}
	hc = tlsconfig.NewHTTPClient(tlsCfg)
	if token != "" {
		hc.Transport = &bearer.Transport{Base: hc.Transport, Token: bearer.Static(token)}
	}
	return hc, closeFn, nil
}

// authorizeServerID accepts only the server ID --server-id names; its error
// names the ID expected (the TLS config prefixes the ID presented).
func authorizeServerID(want spiffeid.ID) tlsconfig.Authorizer {
	return func(got spiffeid.ID, _ [][]*x509.Certificate) error {
		if got != want {
			return fmt.Errorf("--server-id expects %s", want)
		}
		return nil
	}
}

// newClientLogger is the logger of the client commands: warnings and errors
// only, as text on stderr.
func newClientLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
