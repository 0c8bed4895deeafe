package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"google.golang.org/grpc/codes"

	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/internal/spiffetest"
	"github.com/agentd/agentd/tlsconfig"
)

// callerHandler records the identity each send ran with.
type callerHandler struct {
	a2asrv.RequestHandler
	mu  sync.Mutex
	ids []*Identity
}

func (h *callerHandler) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	id, _ := IdentityFrom(ctx)
	h.mu.Lock()
	h.ids = append(h.ids, id)
	h.mu.Unlock()
	return h.RequestHandler.OnSendMessage(ctx, p)
}

func (h *callerHandler) last(t *testing.T) *Identity {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ids) == 0 {
		t.Fatal("no call reached the handler")
	}
	return h.ids[len(h.ids)-1]
}

// tokenKey carries the bearer token one call of connFront's clients sends.
type tokenKey struct{}

// connFront serves a recording engine on the split over mTLS (peerID a
// peer, a peer token) and returns it and a client factory: each client is
// one connection presenting svid, sending the bearer token its call's
// context carries (tokenKey), if any.
func connFront(t *testing.T) (*callerHandler, func(svid spiffeid.ID) *a2agrpc.Client) {
	t.Helper()
	ca, err := tlsconfig.NewDevCA(testTD, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	svid, err := ca.MintX509SVID(serverID, tlsconfig.SVIDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := &spiffetest.Source{}
	src.Set(svid, []*x509bundle.Bundle{ca.Bundle()}, nil)
	tokens, err := ParseTokens([]byte(peerToken + " peer ci\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := engineConfig()
	h := &callerHandler{RequestHandler: cfg.Handler}
	cfg.Handler = h
	cfg.Auth = &Auth{Source: src, Policy: tlsconfig.Policy{Peers: []spiffeid.ID{peerID}}, Tokens: tokens}
	addr, _, _ := splitFront(t, cfg, ConnLimits{}, tlsconfig.ServerConfig(src))
	f := &authFixture{bundle: ca.Bundle()}
	return h, func(id spiffeid.ID) *a2agrpc.Client {
		s, err := ca.MintX509SVID(id, tlsconfig.SVIDOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := a2agrpc.New("https://"+addr+"/", a2agrpc.Options{TLS: f.grpcTLS(s), Header: func(ctx context.Context, h http.Header) {
			if tok, ok := ctx.Value(tokenKey{}).(string); ok {
				h.Set("Authorization", "Bearer "+tok)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// TestGRPCCallerKeptPerConnection: the calls on one gRPC connection over
// mTLS share the identity its client certificate gave on the first call
// (not verified and authorized again a call); another connection of the
// same SVID finds its own.
func TestGRPCCallerKeptPerConnection(t *testing.T) {
	h, client := connFront(t)
	ctx := context.Background()
	a, b := client(peerID), client(peerID)
	var first *Identity
	for i := range 3 {
		if _, err := a.SendMessage(ctx, hello(fmt.Sprintf("k%d", i))); err != nil {
			t.Fatalf("SendMessage %d: %v", i, err)
		}
		id := h.last(t)
		if id.ID != peerID.String() || id.Auth != AuthMTLS || id.Role != tlsconfig.RolePeer {
			t.Fatalf("call %d ran as %+v, want the peer's SVID", i, id)
		}
		if i == 0 {
			first = id
		} else if id != first {
			t.Fatalf("call %d on the same connection found the caller again (%p, the first call's %p)", i, id, first)
		}
	}
	if _, err := b.SendMessage(ctx, hello("other")); err != nil {
		t.Fatal(err)
	}
	if id := h.last(t); id == first || id.ID != peerID.String() {
		t.Fatalf("another connection ran as %p %+v, want its own identity of the same SVID", id, id)
	}
}

// TestGRPCTokenCheckedPerCall: on one mTLS connection a bearer token is
// still checked on each call: a good one makes the token's caller, a bad one
// is refused, and a call without one is the certificate's caller again; a
// connection whose SVID the policy refuses is refused on every call.
func TestGRPCTokenCheckedPerCall(t *testing.T) {
	h, client := connFront(t)
	c := client(peerID)
	withToken := func(tok string) context.Context { return context.WithValue(context.Background(), tokenKey{}, tok) }
	if _, err := c.SendMessage(context.Background(), hello("m1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(withToken(peerToken), hello("t1")); err != nil {
		t.Fatalf("with a good token: %v", err)
	}
	if id := h.last(t); id.ID != "token:ci" || id.Auth != AuthToken {
		t.Fatalf("with a token the call ran as %+v, want token:ci", id)
	}
	if _, err := c.SendMessage(withToken("nope-0123456789"), hello("t2")); grpcCode(err) != codes.Unauthenticated {
		t.Fatalf("with a bad token on an admitted connection: %v, want UNAUTHENTICATED", err)
	}
	if _, err := c.SendMessage(context.Background(), hello("m2")); err != nil {
		t.Fatal(err)
	}
	if id := h.last(t); id.ID != peerID.String() || id.Auth != AuthMTLS {
		t.Fatalf("without a token the call ran as %+v, want the SVID", id)
	}
	refused := client(strangerID)
	for i := range 2 {
		if _, err := refused.SendMessage(context.Background(), hello(fmt.Sprintf("s%d", i))); grpcCode(err) != codes.PermissionDenied {
			t.Fatalf("call %d of a refused SVID: %v, want PERMISSION_DENIED", i, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ids) != 3 {
		t.Fatalf("%d calls reached the handler, want 3", len(h.ids))
	}
}
