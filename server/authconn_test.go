package server

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/agentd/agentd/tlsconfig"
)

// TestAuthIdentityPerConnection: a connection of ConnLimits.Server has its
// client certificate made into its caller once, on its first request; its
// later requests get that identity again (the same value), where a request
// of another connection gets one of its own, and a request that carries a
// bearer token is checked by it all the same.
func TestAuthIdentityPerConnection(t *testing.T) {
	ca, err := tlsconfig.NewDevCA(testTD, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ca.MintX509SVID(peerID, tlsconfig.SVIDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := ParseTokens([]byte(operatorToken + " operator ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := &Auth{Policy: tlsconfig.Policy{Peers: []spiffeid.ID{peerID}}, Tokens: tokens}
	var got *Identity
	h := a.Middleware(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got, _ = IdentityFrom(r.Context()) }))
	srv := ConnLimits{}.Server(h, nil)
	state := &tls.ConnectionState{PeerCertificates: peer.Certificates}
	send := func(conn context.Context, bearer string) *Identity {
		t.Helper()
		got = nil
		r := httptest.NewRequest(http.MethodPost, "/", nil).WithContext(conn)
		r.TLS = state
		if bearer != "" {
			r.Header.Set("Authorization", "Bearer "+bearer)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got == nil {
			t.Fatalf("request refused: HTTP %d %s", w.Code, w.Body.Bytes())
		}
		return got
	}
	conn1 := srv.ConnContext(context.Background(), nil)
	conn2 := srv.ConnContext(context.Background(), nil)
	first := send(conn1, "")
	if first.ID != peerID.String() || first.Auth != AuthMTLS || first.Role != tlsconfig.RolePeer {
		t.Fatalf("identity %+v, want the peer's, by mTLS", first)
	}
	if again := send(conn1, ""); again != first {
		t.Errorf("the connection's second request got identity %p %+v, want its first's (%p): the certificate checked again", again, again, first)
	}
	if other := send(conn2, ""); other == first || other.ID != first.ID {
		t.Errorf("another connection's request got %p %+v, want an identity of its own for the same peer", other, other)
	}
	if op := send(conn1, operatorToken); op.ID != "token:ops" || op.Role != tlsconfig.RoleOperator {
		t.Errorf("a request with a bearer token on the connection got %+v, want the token's operator", op)
	}
	if fresh := send(context.Background(), ""); fresh == first || fresh.ID != first.ID {
		t.Errorf("a request of a server that keeps nothing per connection got %p %+v, want a fresh identity for the peer", fresh, fresh)
	}
}
