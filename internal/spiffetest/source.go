package spiffetest

import (
	"errors"
	"sync"

	"github.com/spiffe/go-spiffe/v2/bundle/jwtbundle"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// Source is an in-memory tlsconfig.Source whose identity a test sets and
// replaces. Safe for concurrent use; the zero value has no identity (not
// ready).
type Source struct {
	mu   sync.Mutex // guards svid, x509, jwt
	svid *x509svid.SVID
	x509 *x509bundle.Set
	jwt  *jwtbundle.Set
}

// Set replaces the SVID and the bundles (either set may be nil).
func (s *Source) Set(svid *x509svid.SVID, x509 []*x509bundle.Bundle, jwt []*jwtbundle.Bundle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.svid = svid
	s.x509 = x509bundle.NewSet(x509...)
	s.jwt = jwtbundle.NewSet(jwt...)
}

// Ready reports whether an SVID is set.
func (s *Source) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.svid != nil
}

// GetX509SVID returns the SVID set.
func (s *Source) GetX509SVID() (*x509svid.SVID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svid == nil {
		return nil, errors.New("spiffetest: no SVID")
	}
	return s.svid, nil
}

// GetX509BundleForTrustDomain returns the X.509 bundle of td.
func (s *Source) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.x509 == nil {
		return nil, errors.New("spiffetest: no bundles")
	}
	return s.x509.GetX509BundleForTrustDomain(td)
}

// GetJWTBundleForTrustDomain returns the JWT bundle of td.
func (s *Source) GetJWTBundleForTrustDomain(td spiffeid.TrustDomain) (*jwtbundle.Bundle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jwt == nil {
		return nil, errors.New("spiffetest: no JWT bundles")
	}
	return s.jwt.GetJWTBundleForTrustDomain(td)
}

// Close does nothing.
func (s *Source) Close() error { return nil }
