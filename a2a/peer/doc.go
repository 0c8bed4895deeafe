// Package peer is the delegation provider for remote A2A agents: a
// delegate.Provider per configured peer (ParseSpec reads the --peer flag)
// that sends a delegation over a2acall, follows the remote task by stream
// or polling, enforces the deadline locally and maps the remote outcome back
// to a result. The HTTP client of each peer (client.go) carries the transport
// security: TLS 1.3, mTLS with this service's SVID checked against the peer's
// expected SPIFFE ID, and a bearer token kept to the peer's own origin.
// docs/ARCHITECTURE.md describes the mesh.
package peer
