package tlsconfig

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/jwtbundle"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/jwtsvid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// MinVersion is the lowest TLS version agentd speaks, as a server and as a
// client.
const MinVersion = tls.VersionTLS13

// Source supplies this workload's identity and the bundles that verify peers.
// Implementations are safe for concurrent use.
type Source interface {
	x509svid.Source   // this workload's X.509 SVID; an error until the first one
	x509bundle.Source // X.509 bundles by trust domain, to verify peers
	jwtbundle.Source  // JWT bundles by trust domain, to verify JWT-SVIDs
	// Ready reports whether the first X.509 SVID has arrived.
	Ready() bool
	// Close releases the source; later calls fail.
	Close() error
}

// Authorizer decides whether a verified peer SPIFFE ID is acceptable: go-spiffe's
// AuthorizeID, AuthorizeMemberOf, AuthorizeAny and AuthorizeOneOf build one.
type Authorizer = spiffetls.Authorizer

// ErrNoSVID is returned while a source has no X.509 SVID yet.
var ErrNoSVID = errors.New("tlsconfig: no X.509 SVID yet")

// ServerConfig returns the TLS configuration of the A2A endpoint. It presents
// the source's current SVID (so a rotation applies to the next handshake), asks
// for a client certificate without requiring one (a caller may use a bearer
// token instead), and fails the handshake when a presented certificate is not a
// valid, unexpired SVID chaining to the bundle of its trust domain. Which
// verified identities may call what is decided later, per request (Policy).
func ServerConfig(src Source) *tls.Config {
	return &tls.Config{
		MinVersion:     MinVersion,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return certificate(src) },
		ClientAuth:     tls.RequestClientCert,
		// VerifyConnection runs on full handshakes and on resumptions alike, so
		// a resumed session is checked against the bundle and clock of now.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil
			}
			_, _, err := x509svid.Verify(cs.PeerCertificates, src)
			if err != nil {
				return fmt.Errorf("client certificate: %w", err)
			}
			return nil
		},
		NextProtos: []string{"h2", "http/1.1"},
	}
}

// HealthConfig returns the TLS configuration of the probe listener: a server
// certificate only, no client certificate asked for (kubelet probes present
// none). Until the source has its first SVID it presents an ephemeral
// self-signed certificate, so /healthz answers and /readyz can say "not ready"
// instead of every probe failing its handshake.
func HealthConfig(src Source) (*tls.Config, error) {
	fallback, err := selfSigned()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: MinVersion,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c, err := certificate(src); err == nil {
				return c, nil
			}
			return fallback, nil
		},
	}, nil
}

// ClientConfig returns the TLS configuration for calling a peer: it verifies the
// server's SVID against bundles and checks its ID with authorize (no host name
// checks, the SPIFFE way). svid, when not nil, supplies the client certificate
// for mTLS; without it the client presents none (bearer token callers).
func ClientConfig(svid x509svid.Source, bundles x509bundle.Source, authorize Authorizer) *tls.Config {
	if authorize == nil {
		authorize = spiffetls.AuthorizeAny()
	}
	c := &tls.Config{
		MinVersion: MinVersion,
		// Host names are not checked: the server is verified by its SPIFFE ID in
		// VerifyConnection, which also runs on resumed sessions.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, chains, err := x509svid.Verify(cs.PeerCertificates, bundles)
			if err != nil {
				return fmt.Errorf("server certificate: %w", err)
			}
			if err := authorize(id, chains); err != nil {
				return fmt.Errorf("server %s: %w", id, err)
			}
			return nil
		},
	}
	if svid != nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return certificate(svid) }
	}
	return c
}

// NewHTTPClient returns an HTTP client for A2A calls over cfg: no total timeout
// (it would cut long streams; bound calls with their context instead), and
// enough idle connections per host that concurrent calls reuse TLS sessions
// instead of paying a handshake each. A nil cfg (plain http) still holds an
// https URL to MinVersion, with the system roots.
func NewHTTPClient(cfg *tls.Config) *http.Client {
	if cfg == nil {
		cfg = &tls.Config{MinVersion: MinVersion}
	}
	return &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     cfg,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}}
}

// PeerHTTPClient returns the HTTP client for calling one A2A peer over mTLS:
// it presents src's current SVID and accepts only a server whose SPIFFE ID is
// peer, or, when peer is the zero ID, any server of src's own trust domain.
// Rotations of src apply to new connections.
func PeerHTTPClient(src Source, peer spiffeid.ID) *http.Client {
	authorize := spiffetls.AuthorizeID(peer)
	if peer.IsZero() {
		authorize = func(id spiffeid.ID, _ [][]*x509.Certificate) error {
			own, err := OwnID(src)
			if err != nil {
				return err
			}
			if !id.MemberOf(own.TrustDomain()) {
				return fmt.Errorf("server %s is not in trust domain %s", id, own.TrustDomain())
			}
			return nil
		}
	}
	return NewHTTPClient(ClientConfig(src, src, authorize))
}

// PeerID returns the SPIFFE ID of the peer's certificate. The certificate was
// verified during the handshake; ok is false when the peer presented none.
func PeerID(cs *tls.ConnectionState) (id spiffeid.ID, ok bool, err error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return spiffeid.ID{}, false, nil
	}
	id, err = x509svid.IDFromCert(cs.PeerCertificates[0])
	if err != nil {
		return spiffeid.ID{}, true, fmt.Errorf("peer certificate: %w", err)
	}
	return id, true, nil
}

// OwnID returns the SPIFFE ID of the source's current SVID.
func OwnID(src x509svid.Source) (spiffeid.ID, error) {
	s, err := src.GetX509SVID()
	if err != nil {
		return spiffeid.ID{}, err
	}
	return s.ID, nil
}

// VerifyJWTSVID validates a JWT-SVID bearer token: signed by a key in the JWT
// bundle of its subject's trust domain, unexpired, and with this workload's own
// SPIFFE ID among its audiences.
func VerifyJWTSVID(src Source, token string) (*jwtsvid.SVID, error) {
	own, err := OwnID(src)
	if err != nil {
		return nil, fmt.Errorf("jwt-svid: no audience to check against: %w", err)
	}
	s, err := jwtsvid.ParseAndValidate(token, src, []string{own.String()})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// WaitReady polls src until it is ready or ctx ends.
func WaitReady(ctx context.Context, src Source) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !src.Ready() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the first SVID: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
	return nil
}

func certificate(src x509svid.Source) (*tls.Certificate, error) {
	s, err := src.GetX509SVID()
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{PrivateKey: s.PrivateKey, Leaf: s.Certificates[0]}
	for _, cert := range s.Certificates {
		c.Certificate = append(c.Certificate, cert.Raw)
	}
	return c, nil
}

// selfSigned makes an ephemeral certificate for the probe listener.
func selfSigned() (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("health certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("health certificate: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "agentd health (no SVID yet)"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("health certificate: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
