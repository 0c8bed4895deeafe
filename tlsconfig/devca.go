package tlsconfig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// DevCA is a development certificate authority for one trust domain: a
// self-signed ECDSA P-256 root that mints X.509 SVIDs. It is for local mTLS and
// tests, not production (use SPIRE). Safe for concurrent use.
type DevCA struct {
	TrustDomain spiffeid.TrustDomain
	Cert        *x509.Certificate
	Key         crypto.Signer
}

// NewDevCA creates a CA for td valid from a minute ago for validity.
func NewDevCA(td spiffeid.TrustDomain, validity time.Duration) (*DevCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("dev ca key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"agentd development CA"}, CommonName: td.String()},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		URIs:                  []*url.URL{td.ID().URL()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("dev ca certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("dev ca certificate: %w", err)
	}
	return &DevCA{TrustDomain: td, Cert: cert, Key: key}, nil
}

// SVIDOptions shape a minted SVID. Zero times mean "from a minute ago" and
// "for 24 hours".
type SVIDOptions struct {
	NotBefore time.Time
	NotAfter  time.Time
	// DNSNames and IPs are extra SANs, so tools that check host names (curl)
	// accept a server SVID; SPIFFE verification ignores them.
	DNSNames []string
	IPs      []net.IP
}

// MintX509SVID issues an X.509 SVID for id, which may be in any trust domain
// (a test can mint a foreign ID); peers verify it against this CA's bundle.
func (ca *DevCA) MintX509SVID(id spiffeid.ID, opt SVIDOptions) (*x509svid.SVID, error) {
	if id.IsZero() {
		return nil, errors.New("dev ca: empty SPIFFE ID")
	}
	now := time.Now()
	if opt.NotBefore.IsZero() {
		opt.NotBefore = now.Add(-time.Minute)
	}
	if opt.NotAfter.IsZero() {
		opt.NotAfter = now.Add(24 * time.Hour)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("svid key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"agentd"}},
		NotBefore:             opt.NotBefore,
		NotAfter:              opt.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageKeyAgreement,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{id.URL()},
		DNSNames:              opt.DNSNames,
		IPAddresses:           opt.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("svid certificate for %s: %w", id, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("svid certificate for %s: %w", id, err)
	}
	return &x509svid.SVID{ID: id, Certificates: []*x509.Certificate{cert}, PrivateKey: key}, nil
}

// Bundle returns the CA's trust bundle.
func (ca *DevCA) Bundle() *x509bundle.Bundle {
	return x509bundle.FromX509Authorities(ca.TrustDomain, []*x509.Certificate{ca.Cert})
}

// CertPEM returns the CA certificate in PEM.
func (ca *DevCA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPEM returns the CA key in PKCS#8 PEM.
func (ca *DevCA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return nil, fmt.Errorf("dev ca key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WriteSVID writes an SVID's certificate chain (mode 0644) and its key (0600).
func WriteSVID(s *x509svid.SVID, certPath, keyPath string) error {
	certPEM, keyPEM, err := s.Marshal()
	if err != nil {
		return fmt.Errorf("encode svid %s: %w", s.ID, err)
	}
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(keyPath, keyPEM, 0o600)
}

// Files written by WriteDevSet into its folder.
const (
	DevCACert       = "ca.pem"           // the CA certificate
	DevCAKey        = "ca-key.pem"       // the CA key (keep it; it mints more SVIDs)
	DevBundle       = "bundle.pem"       // the trust bundle: --tls-bundle for everyone
	DevServerCert   = "server.pem"       // agentd serve's SVID: --tls-cert
	DevServerKey    = "server-key.pem"   // and its key: --tls-key
	DevPeerCert     = "peer.pem"         // a peer's SVID (allowed by --allow-peer or the trust domain)
	DevPeerKey      = "peer-key.pem"     //
	DevOperatorCert = "operator.pem"     // an operator's SVID (allowed by --operator)
	DevOperatorKey  = "operator-key.pem" //
)

// DevSet is what WriteDevSet minted.
type DevSet struct {
	CA       *DevCA
	Server   spiffeid.ID // spiffe://TD/agentd
	Peer     spiffeid.ID // spiffe://TD/peer
	Operator spiffeid.ID // spiffe://TD/operator
	Files    []string    // the paths written
}

// WriteDevSet mints a CA for td plus server, peer and operator SVIDs valid for
// validity and writes them into dir (created 0700 if missing). It refuses to
// overwrite existing files unless force is set.
func WriteDevSet(dir string, td spiffeid.TrustDomain, validity time.Duration, force bool) (*DevSet, error) {
	names := []string{DevCACert, DevCAKey, DevBundle, DevServerCert, DevServerKey, DevPeerCert, DevPeerKey, DevOperatorCert, DevOperatorKey}
	if !force {
		for _, n := range names {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				return nil, fmt.Errorf("%s already exists (use --force to replace the set)", filepath.Join(dir, n))
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := NewDevCA(td, validity)
	if err != nil {
		return nil, err
	}
	set := &DevSet{
		CA:       ca,
		Server:   spiffeid.RequireFromPath(td, "/agentd"),
		Peer:     spiffeid.RequireFromPath(td, "/peer"),
		Operator: spiffeid.RequireFromPath(td, "/operator"),
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	write := func(name string, b []byte, mode os.FileMode) error {
		p := filepath.Join(dir, name)
		set.Files = append(set.Files, p)
		return os.WriteFile(p, b, mode)
	}
	if err := write(DevCACert, ca.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	if err := write(DevCAKey, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := write(DevBundle, ca.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	now := time.Now()
	mint := []struct {
		id         spiffeid.ID
		cert, key  string
		serverSANs bool
	}{
		{set.Server, DevServerCert, DevServerKey, true},
		{set.Peer, DevPeerCert, DevPeerKey, false},
		{set.Operator, DevOperatorCert, DevOperatorKey, false},
	}
	for _, m := range mint {
		opt := SVIDOptions{NotBefore: now.Add(-time.Minute), NotAfter: now.Add(validity)}
		if m.serverSANs {
			opt.DNSNames = []string{"localhost"}
			opt.IPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		s, err := ca.MintX509SVID(m.id, opt)
		if err != nil {
			return nil, err
		}
		cp, kp := filepath.Join(dir, m.cert), filepath.Join(dir, m.key)
		if err := WriteSVID(s, cp, kp); err != nil {
			return nil, err
		}
		set.Files = append(set.Files, cp, kp)
	}
	return set, nil
}

func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n, nil
}

// LoadDevCA reads a CA written by WriteDevSet (ca.pem and ca-key.pem), to mint
// more SVIDs in the same trust domain.
func LoadDevCA(certPath, keyPath string) (*DevCA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", certPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%s: no PEM key", keyPath)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || len(cert.URIs) != 1 {
		return nil, fmt.Errorf("%s: not a dev CA written by agentd certs", certPath)
	}
	id, err := spiffeid.FromURI(cert.URIs[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	return &DevCA{TrustDomain: id.TrustDomain(), Cert: cert, Key: signer}, nil
}
