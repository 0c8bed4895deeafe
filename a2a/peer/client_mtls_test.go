package peer

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/agentd/agentd/a2a/a2atest"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/bearer"
	"github.com/agentd/agentd/internal/spiffetest"
	"github.com/agentd/agentd/supervisor/delegate"
	"github.com/agentd/agentd/tlsconfig"
)

// mtlsPeerServer serves a stock a2a-go handler over TLS with srv's SVID,
// requiring a client SVID; it records the SPIFFE IDs and Authorization
// headers of the requests it got.
type mtlsPeerServer struct {
	url string

	mu      sync.Mutex
	callers []string
	auth    []string
}

func serveMTLSPeer(t *testing.T, srv *spiffetest.Source, exec *a2atest.Executor) *mtlsPeerServer {
	t.Helper()
	s := &mtlsPeerServer{}
	mux := http.NewServeMux()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Not httptest's StartTLS: it would put its own certificate first.
	h := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok, err := tlsconfig.PeerID(r.TLS)
		if err != nil || !ok {
			http.Error(w, "client certificate required", http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		s.callers = append(s.callers, id.String())
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}), TLSConfig: tlsconfig.ServerConfig(srv), ErrorLog: log.New(io.Discard, "", 0)}
	go h.ServeTLS(ln, "", "")
	t.Cleanup(func() { h.Close() })
	s.url = "https://" + ln.Addr().String() + "/"
	mux.Handle("/", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(a2atest.Card(s.url)))
	return s
}

// A peer with an expected SPIFFE ID is called over mTLS with the service's
// own SVID: the delegation runs, the peer sees the caller's ID, one
// keep-alive client without a total timeout carries every call (with the
// bearer token when configured), and a server presenting another ID is
// refused before anything is sent.
func TestClientsMutualTLS(t *testing.T) {
	td := spiffeid.RequireTrustDomainFromString("example.org")
	ca, err := tlsconfig.NewDevCA(td, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	idA, idB := spiffeid.RequireFromPath(td, "/agentd-a"), spiffeid.RequireFromPath(td, "/agentd-b")
	source := func(id spiffeid.ID) *spiffetest.Source {
		svid, err := ca.MintX509SVID(id, tlsconfig.SVIDOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := &spiffetest.Source{}
		s.Set(svid, []*x509bundle.Bundle{ca.Bundle()}, nil)
		return s
	}
	srcA := source(idA)
	exec := &a2atest.Executor{}
	b := serveMTLSPeer(t, source(idB), exec)
	tok := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	cfg := Config{Name: "b", URL: b.url, SPIFFEID: idB.String(), BearerTokenFile: tok, Timeout: 5 * time.Second}
	hc, err := Clients(srcA)(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if hc.Timeout != 0 {
		t.Fatalf("a total timeout of %s would cut streams", hc.Timeout)
	}
	if tr := hc.Transport.(*bearer.Transport).Base.(*http.Transport); tr.MaxIdleConnsPerHost <= 2 || tr.TLSHandshakeTimeout != 5*time.Second {
		t.Fatalf("transport: MaxIdleConnsPerHost %d, TLSHandshakeTimeout %s", tr.MaxIdleConnsPerHost, tr.TLSHandshakeTimeout)
	}
	p, err := New(cfg, Clients(srcA))
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, mustStart(t, p, peerRequest("over mtls", 10*time.Second)))
	if res.Status != api.StatusCompleted || res.Distillate.Text() != "echo: over mtls" {
		t.Fatalf("result %+v", res)
	}
	b.mu.Lock()
	for i, c := range b.callers {
		if c != idA.String() || b.auth[i] != "Bearer s3cret" {
			t.Errorf("request %d came from %q with Authorization %q", i, c, b.auth[i])
		}
	}
	calls := len(b.callers)
	b.mu.Unlock()
	if calls < 2 {
		t.Fatalf("the peer saw %d requests; want the card and the send at least", calls)
	}

	// The same server under an ID the config does not expect.
	wrong := cfg
	wrong.SPIFFEID = spiffeid.RequireFromPath(td, "/agentd-c").String()
	p, err = New(wrong, Clients(srcA))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Start(context.Background(), peerRequest("never sent", 10*time.Second))
	if err == nil || !strings.Contains(err.Error(), idB.String()) {
		t.Fatalf("a server presenting %s was accepted as %s: %v", idB, wrong.SPIFFEID, err)
	}
	n := len(exec.Messages())
	if n != 1 {
		t.Fatalf("the peer got %d messages, want only the first", n)
	}

	// Without an identity of its own the service cannot call a SPIFFE peer;
	// an ID that does not parse or a plain http URL is bad config.
	if _, err := Clients(nil)(cfg); err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("no own SVID: %v", err)
	}
	for _, spec := range []string{"b=http://127.0.0.1:1,spiffe=spiffe://example.org/b", "b=https://x,spiffe=spiffe://Bad Domain/b"} {
		if _, err := ParseSpec(spec); err == nil {
			t.Errorf("%q accepted", spec)
		}
	}
}

func mustStart(t *testing.T, p *Provider, req delegate.Request) delegate.Run {
	t.Helper()
	run, err := p.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return run
}
