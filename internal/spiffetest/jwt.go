// Package spiffetest provides SPIFFE test doubles for agentd's tests: a fake
// Workload API served over a unix socket (the go-spiffe workload service,
// implemented here) and a JWT-SVID signing authority. It is for tests only.
package spiffetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/spiffe/go-spiffe/v2/bundle/jwtbundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// JWTAuthority signs JWT-SVIDs for one trust domain. Safe for concurrent use.
type JWTAuthority struct {
	TrustDomain spiffeid.TrustDomain
	Key         *ecdsa.PrivateKey
	KeyID       string
}

// NewJWTAuthority makes an ES256 signing key for td.
func NewJWTAuthority(td spiffeid.TrustDomain) (*JWTAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	kid := make([]byte, 8)
	if _, err := rand.Read(kid); err != nil {
		return nil, err
	}
	return &JWTAuthority{TrustDomain: td, Key: key, KeyID: hex.EncodeToString(kid)}, nil
}

// Mint signs a JWT-SVID for sub with these audiences, expiring at exp.
func (a *JWTAuthority) Mint(sub spiffeid.ID, aud []string, exp time.Time) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: a.Key, KeyID: a.KeyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("jwt signer: %w", err)
	}
	now := time.Now()
	claims := jwt.Claims{
		Subject:  sub.String(),
		Audience: aud,
		Expiry:   jwt.NewNumericDate(exp),
		IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute)),
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

// Bundle returns the JWT bundle holding the authority's public key.
func (a *JWTAuthority) Bundle() *jwtbundle.Bundle {
	b := jwtbundle.New(a.TrustDomain)
	_ = b.AddJWTAuthority(a.KeyID, a.Key.Public())
	return b
}

// WriteBundle writes the bundle as a JWKS file (for --jwt-bundle).
func (a *JWTAuthority) WriteBundle(path string) error {
	b, err := a.Bundle().Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
