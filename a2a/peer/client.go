package peer

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/agentd/agentd/internal/bearer"
	"github.com/agentd/agentd/tlsconfig"
)

// HTTPClientFunc builds the one shared http.Client a peer is called through.
// It is the seam for transport security: DefaultClient speaks plain http
// (loopback only) or https with the system roots, plus an optional bearer
// token; Clients adds mTLS with this service's SVID for a peer whose
// SPIFFE ID is configured, and checks that ID.
type HTTPClientFunc func(Config) (*http.Client, error)

// DefaultClient returns a keep-alive client for a peer: idle connections
// per host well above Go's default of 2 (so concurrent delegations reuse
// connections instead of paying a handshake each), no total timeout (which
// would cut long streams; calls are bounded by their contexts), and the
// bearer token from BearerTokenFile on every request. A SPIFFE ID needs mTLS,
// which this builder does not do: it refuses the config (Clients does).
func DefaultClient(c Config) (*http.Client, error) {
	if c.SPIFFEID != "" {
		return nil, fmt.Errorf("peer %s: an expected SPIFFE ID needs an mTLS client, which is not configured", c.Name)
	}
	return withBearer(c, transport(c))
}

// Clients returns the HTTPClientFunc of a service whose own SPIFFE
// identity is src (nil when it has none). A peer configured with an expected
// SPIFFE ID is called over mTLS: the client presents src's current SVID (a
// rotation applies to the next connection) and accepts only a server that
// presents exactly that ID, verified against src's bundles
// (tlsconfig.PeerHTTPClient); without src such a peer is refused. Any other
// peer gets DefaultClient. Either way it is one keep-alive client per peer
// with the bearer token of BearerTokenFile, if set, on every request.
func Clients(src tlsconfig.Source) HTTPClientFunc {
	return func(c Config) (*http.Client, error) {
		if c.SPIFFEID == "" {
			return DefaultClient(c)
		}
		if src == nil {
			return nil, fmt.Errorf("peer %s: spiffe=%s needs this service's own SVID for mTLS (--spiffe-socket, or --tls-cert/--tls-key/--tls-bundle)", c.Name, c.SPIFFEID)
		}
		id, err := spiffeid.FromString(c.SPIFFEID)
		if err != nil {
			return nil, fmt.Errorf("peer %s: spiffe=%q: %w", c.Name, c.SPIFFEID, err)
		}
		hc := tlsconfig.PeerHTTPClient(src, id)
		tr, ok := hc.Transport.(*http.Transport)
		if !ok {
			return nil, fmt.Errorf("peer %s: unexpected transport %T", c.Name, hc.Transport)
		}
		// The peer's timeout bounds connection setup, as for other peers.
		timeout := c.timeout()
		tr.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
		tr.TLSHandshakeTimeout = timeout
		return withBearer(c, tr)
	}
}

// timeout is the bound of each unary call and of connection setup.
func (c Config) timeout() time.Duration {
	if c.Timeout <= 0 {
		return 30 * time.Second
	}
	return c.Timeout
}

// transport is the transport of one plain or https (system roots) peer's
// shared client: dial and TLS handshake bounded by the peer's timeout, 64 idle
// connections per host.
func transport(c Config) *http.Transport {
	timeout := c.timeout()
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ExpectContinueTimeout: time.Second,
		// Peers are the mesh: TLS 1.3 at least, as on every listener of agentd
		// (an mTLS peer's config, set by its client func, is 1.3 too).
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13},
	}
}

// withBearer returns the client over base, adding the bearer token of
// c.BearerTokenFile, when one is configured, to every request to the peer's
// own origin (c.URL's scheme and host): a redirect elsewhere is followed
// without it.
func withBearer(c Config, base *http.Transport) (*http.Client, error) {
	if c.BearerTokenFile == "" {
		return &http.Client{Transport: base}, nil
	}
	tok := bearer.File(c.BearerTokenFile)
	if _, err := tok(); err != nil {
		return nil, fmt.Errorf("peer %s: %w", c.Name, err)
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", c.Name, err)
	}
	return &http.Client{Transport: &bearer.Transport{Base: base, Token: tok, Scheme: u.Scheme, Host: u.Host}}, nil
}
