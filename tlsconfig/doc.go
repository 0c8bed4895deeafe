// Package tlsconfig builds agentd's TLS configurations from SPIFFE identities.
//
// A Source supplies this workload's X.509 SVID, the X.509 trust bundles that
// verify peers, and the JWT bundles that verify JWT-SVID bearer tokens. Three
// kinds exist: the SPIFFE Workload API (WorkloadSource, rotating without a
// restart), static PEM files re-read when they change (FileSource), and a
// development CA that mints SVIDs into files for local mTLS (DevCA, used by
// `agentd certs init`).
//
// ServerConfig, HealthConfig and ClientConfig turn a source into *tls.Config
// values with TLS 1.3 as the minimum. Peers are verified the SPIFFE way (chain to
// the bundle of the trust domain in the peer's SPIFFE ID, no host names), so
// crypto/tls's VerifiedChains stay empty: read a peer's identity with PeerID
// from ConnectionState.PeerCertificates. Policy decides what a verified
// identity may do (peer or operator).
package tlsconfig
