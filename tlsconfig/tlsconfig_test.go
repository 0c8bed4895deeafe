package tlsconfig_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/jwtbundle"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/agentd/agentd/internal/spiffetest"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/tlsconfig"
)

var (
	td      = spiffeid.RequireTrustDomainFromString("example.org")
	otherTD = spiffeid.RequireTrustDomainFromString("other.org")
	srvID   = spiffeid.RequireFromPath(td, "/agentd")
	peerID  = spiffeid.RequireFromPath(td, "/peer")
)

func newCA(t *testing.T, td spiffeid.TrustDomain) *tlsconfig.DevCA {
	t.Helper()
	ca, err := tlsconfig.NewDevCA(td, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mint(t *testing.T, ca *tlsconfig.DevCA, id spiffeid.ID, opt tlsconfig.SVIDOptions) *x509svid.SVID {
	t.Helper()
	s, err := ca.MintX509SVID(id, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func source(svid *x509svid.SVID, bundles ...*x509bundle.Bundle) *spiffetest.Source {
	s := &spiffetest.Source{}
	s.Set(svid, bundles, nil)
	return s
}

// handshake runs one TLS handshake over a real loopback connection and returns
// the server's view of it, or the first error of either side.
func handshake(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		cs  tls.ConnectionState
		err error
	}
	done := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- res{err: err}
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if err == nil {
			// TLS 1.3 clients finish before the server has checked their
			// certificate: read once so a late rejection reaches the client.
			tc.Write([]byte("x"))
		}
		done <- res{tc.ConnectionState(), err}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	var cerr error
	if err != nil {
		cerr = err
	} else {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 1)
		_, cerr = c.Read(buf)
		c.Close()
	}
	r := <-done
	if r.err != nil {
		return r.cs, r.err
	}
	return r.cs, cerr
}

func TestServerConfigVerifiesClientSVIDs(t *testing.T) {
	ca := newCA(t, td)
	foreign := newCA(t, otherTD)
	srv := source(mint(t, ca, srvID, tlsconfig.SVIDOptions{}), ca.Bundle())
	serverCfg := tlsconfig.ServerConfig(srv)
	client := func(svid *x509svid.SVID) *tls.Config {
		var s x509svid.Source
		if svid != nil {
			s = svid
		}
		return tlsconfig.ClientConfig(s, ca.Bundle(), spiffetls.AuthorizeID(srvID))
	}
	t.Run("valid", func(t *testing.T) {
		cs, err := handshake(t, serverCfg, client(mint(t, ca, peerID, tlsconfig.SVIDOptions{})))
		if err != nil {
			t.Fatal(err)
		}
		if cs.Version != tls.VersionTLS13 {
			t.Errorf("version %x, want TLS 1.3", cs.Version)
		}
		id, ok, err := tlsconfig.PeerID(&cs)
		if err != nil || !ok || id != peerID {
			t.Fatalf("PeerID = %v, %v, %v; want %v", id, ok, err, peerID)
		}
		if len(cs.VerifiedChains) != 0 {
			t.Errorf("VerifiedChains unexpectedly set: go-spiffe verifies, crypto/tls does not")
		}
	})
	t.Run("no client certificate is let through for bearer auth", func(t *testing.T) {
		cs, err := handshake(t, serverCfg, client(nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := tlsconfig.PeerID(&cs); ok {
			t.Fatal("PeerID reported a certificate")
		}
	})
	t.Run("another trust domain fails the handshake", func(t *testing.T) {
		_, err := handshake(t, serverCfg, client(mint(t, foreign, spiffeid.RequireFromPath(otherTD, "/peer"), tlsconfig.SVIDOptions{})))
		if err == nil || !strings.Contains(err.Error(), `"other.org"`) {
			t.Fatalf("handshake with a foreign trust domain's certificate: %v", err)
		}
	})
	t.Run("our ID signed by a foreign CA fails the handshake", func(t *testing.T) {
		_, err := handshake(t, serverCfg, client(mint(t, foreign, peerID, tlsconfig.SVIDOptions{})))
		if err == nil {
			t.Fatal("handshake succeeded with a certificate our bundle did not sign")
		}
	})
	t.Run("expired certificate fails the handshake", func(t *testing.T) {
		old := mint(t, ca, peerID, tlsconfig.SVIDOptions{NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
		_, err := handshake(t, serverCfg, client(old))
		if err == nil || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("handshake with an expired certificate: %v", err)
		}
	})
	t.Run("client refuses a server with the wrong ID", func(t *testing.T) {
		cfg := tlsconfig.ClientConfig(nil, ca.Bundle(), spiffetls.AuthorizeID(spiffeid.RequireFromPath(td, "/someone-else")))
		_, err := handshake(t, serverCfg, cfg)
		if err == nil {
			t.Fatal("client accepted a server with an unexpected SPIFFE ID")
		}
	})
	t.Run("TLS 1.2 is refused", func(t *testing.T) {
		cfg := client(nil)
		cfg.MaxVersion = tls.VersionTLS12
		cfg.MinVersion = tls.VersionTLS12
		if _, err := handshake(t, serverCfg, cfg); err == nil {
			t.Fatal("TLS 1.2 handshake succeeded")
		}
	})
}

func TestHealthConfigServesBeforeTheFirstSVID(t *testing.T) {
	src := &spiffetest.Source{}
	cfg, err := tlsconfig.HealthConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	probe := &tls.Config{InsecureSkipVerify: true} // kubelet probes verify nothing
	cs, err := handshakeClientView(t, cfg, probe)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x509svid.IDFromCert(cs.PeerCertificates[0]); err == nil {
		t.Fatal("before the first SVID the probe listener presented an SVID")
	}
	ca := newCA(t, td)
	src.Set(mint(t, ca, srvID, tlsconfig.SVIDOptions{}), []*x509bundle.Bundle{ca.Bundle()}, nil)
	cs, err = handshakeClientView(t, cfg, probe)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := x509svid.IDFromCert(cs.PeerCertificates[0]); err != nil || id != srvID {
		t.Fatalf("after the SVID arrived the probe listener presented %v (%v), want %v", id, err, srvID)
	}
	if cs.Version != tls.VersionTLS13 {
		t.Errorf("version %x, want TLS 1.3", cs.Version)
	}
}

// handshakeClientView returns the client's view of a handshake.
func handshakeClientView(t *testing.T, server, client *tls.Config) (tls.ConnectionState, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		tc.Handshake()
		tc.Write([]byte("x"))
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	return c.ConnectionState(), nil
}

func TestFileSourceReloadsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, td)
	cert, key, bundle := filepath.Join(dir, "svid.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "bundle.pem")
	first := mint(t, ca, srvID, tlsconfig.SVIDOptions{})
	if err := tlsconfig.WriteSVID(first, cert, key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs testkit.Buffer
	src, err := tlsconfig.NewFileSource(tlsconfig.Files{Cert: cert, Key: key, Bundle: bundle, CheckEvery: time.Millisecond},
		slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	serial := func() string {
		s, err := src.GetX509SVID()
		if err != nil {
			t.Fatal(err)
		}
		return s.Certificates[0].SerialNumber.String()
	}
	if got := serial(); got != first.Certificates[0].SerialNumber.String() {
		t.Fatalf("serial %s, want the first SVID's", got)
	}

	// A half-written rotation (new certificate, old key) keeps the old identity.
	second := mint(t, ca, srvID, tlsconfig.SVIDOptions{})
	certPEM, keyPEM, err := second.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cert, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	// Read until the source has seen the change and refused it.
	testkit.WaitFor(t, 10*time.Second, "the half-written rotation noticed", func() bool {
		if got := serial(); got != first.Certificates[0].SerialNumber.String() {
			t.Fatalf("a certificate without its key replaced the identity (serial %s)", got)
		}
		return strings.Contains(logs.String(), "tls files changed but do not load")
	})

	// The key lands through an atomic rename: the new identity takes over.
	tmp := key + ".tmp"
	if err := os.WriteFile(tmp, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, key); err != nil {
		t.Fatal(err)
	}
	want := second.Certificates[0].SerialNumber.String()
	testkit.WaitFor(t, 5*time.Second, "the rotated SVID replacing the first", func() bool { return serial() == want })
	if _, err := src.GetX509BundleForTrustDomain(otherTD); err == nil {
		t.Error("a static bundle answered for a foreign trust domain")
	}
	if _, err := src.GetJWTBundleForTrustDomain(td); err == nil {
		t.Error("a JWT bundle without --jwt-bundle")
	}
}

func TestNewFileSourceNamesTheBadFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.pem")
	_, err := tlsconfig.NewFileSource(tlsconfig.Files{Cert: missing, Key: missing, Bundle: missing}, nil)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("error %v does not name %s", err, missing)
	}
}

func TestWorkloadSourceReadyOnFirstSVIDAndRotates(t *testing.T) {
	dir, err := os.MkdirTemp("", "wl") // unix socket paths are short
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	api, err := spiffetest.StartWorkloadAPI(filepath.Join(dir, "api.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	src, err := tlsconfig.NewWorkloadSource(api.Addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// The stream is open but carries no identity yet.
	testkit.WaitFor(t, 10*time.Second, "the X.509 stream to open", func() bool { return api.X509Fetches() > 0 })
	if src.Ready() {
		t.Fatal("ready before any SVID")
	}
	if _, err := src.GetX509SVID(); !errors.Is(err, tlsconfig.ErrNoSVID) {
		t.Fatalf("GetX509SVID before the first SVID: %v", err)
	}
	ca := newCA(t, td)
	first := mint(t, ca, srvID, tlsconfig.SVIDOptions{})
	api.SetX509(first, ca.Bundle())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tlsconfig.WaitReady(ctx, src); err != nil {
		t.Fatal(err)
	}
	second := mint(t, ca, srvID, tlsconfig.SVIDOptions{})
	api.SetX509(second, ca.Bundle())
	testkit.WaitFor(t, 10*time.Second, "the rotated SVID", func() bool {
		s, err := src.GetX509SVID()
		return err == nil && s.Certificates[0].SerialNumber.Cmp(second.Certificates[0].SerialNumber) == 0
	})
	auth, err := spiffetest.NewJWTAuthority(td)
	if err != nil {
		t.Fatal(err)
	}
	api.SetJWTAuthority(auth)
	testkit.WaitFor(t, 10*time.Second, "the JWT bundle", func() bool {
		b, err := src.GetJWTBundleForTrustDomain(td)
		return err == nil && b.HasJWTAuthority(auth.KeyID)
	})
	tok, err := auth.Mint(peerID, []string{srvID.String()}, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tlsconfig.VerifyJWTSVID(src, tok)
	if err != nil || got.ID != peerID {
		t.Fatalf("VerifyJWTSVID = %v, %v", got, err)
	}
	if err := src.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := src.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if src.Ready() {
		t.Fatal("ready after Close")
	}
}

// A client without a TLS configuration of its own still refuses TLS 1.2.
func TestNewHTTPClientWithoutConfigIsTLS13(t *testing.T) {
	tr := tlsconfig.NewHTTPClient(nil).Transport.(*http.Transport)
	if tr.TLSClientConfig == nil || tr.TLSClientConfig.MinVersion != tls.VersionTLS13 {
		t.Fatalf("TLS config %+v, want MinVersion TLS 1.3", tr.TLSClientConfig)
	}
}

func TestVerifyJWTSVID(t *testing.T) {
	ca := newCA(t, td)
	auth, err := spiffetest.NewJWTAuthority(td)
	if err != nil {
		t.Fatal(err)
	}
	src := &spiffetest.Source{}
	src.Set(mint(t, ca, srvID, tlsconfig.SVIDOptions{}), []*x509bundle.Bundle{ca.Bundle()}, []*jwtbundle.Bundle{auth.Bundle()})
	foreign, err := spiffetest.NewJWTAuthority(td)
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(time.Hour)
	cases := []struct {
		name string
		a    *spiffetest.JWTAuthority
		aud  []string
		exp  time.Time
		ok   bool
	}{
		{"our audience", auth, []string{srvID.String()}, hour, true},
		{"among several audiences", auth, []string{"spiffe://example.org/x", srvID.String()}, hour, true},
		{"wrong audience", auth, []string{"spiffe://example.org/someone-else"}, hour, false},
		{"expired", auth, []string{srvID.String()}, time.Now().Add(-time.Minute), false},
		{"unknown signing key", foreign, []string{srvID.String()}, hour, false},
	}
	for _, c := range cases {
		tok, err := c.a.Mint(peerID, c.aud, c.exp)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tlsconfig.VerifyJWTSVID(src, tok)
		if (err == nil) != c.ok {
			t.Errorf("%s: err = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestPolicyRoles(t *testing.T) {
	p, err := tlsconfig.ParsePolicy([]string{"spiffe://example.org/peer"}, []string{"partner.org"}, []string{"spiffe://example.org/operator,spiffe://example.org/ops2"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		id   string
		want tlsconfig.Role
	}{
		{"spiffe://example.org/peer", tlsconfig.RolePeer},
		{"spiffe://example.org/operator", tlsconfig.RoleOperator},
		{"spiffe://example.org/ops2", tlsconfig.RoleOperator},
		{"spiffe://partner.org/anyone", tlsconfig.RolePeer},
		{"spiffe://example.org/stranger", tlsconfig.RoleNone},
		{"spiffe://other.org/peer", tlsconfig.RoleNone},
	}
	for _, c := range cases {
		if got := p.Role(spiffeid.RequireFromString(c.id)); got != c.want {
			t.Errorf("Role(%s) = %s, want %s", c.id, got, c.want)
		}
	}
	for _, bad := range [][3][]string{
		{{"not-a-spiffe-id"}, nil, nil},
		{nil, {"Bad Domain!"}, nil},
		{nil, nil, {"https://example.org/op"}},
	} {
		if _, err := tlsconfig.ParsePolicy(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("ParsePolicy(%q) accepted a bad value", bad)
		}
	}
	if !(&tlsconfig.Policy{}).Empty() {
		t.Error("the zero policy is not empty")
	}
}

func TestWriteDevSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	set, err := tlsconfig.WriteDevSet(dir, td, time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cert, key string
		id        spiffeid.ID
	}{
		{tlsconfig.DevServerCert, tlsconfig.DevServerKey, set.Server},
		{tlsconfig.DevPeerCert, tlsconfig.DevPeerKey, set.Peer},
		{tlsconfig.DevOperatorCert, tlsconfig.DevOperatorKey, set.Operator},
	} {
		src, err := tlsconfig.NewFileSource(tlsconfig.Files{Cert: filepath.Join(dir, c.cert), Key: filepath.Join(dir, c.key), Bundle: filepath.Join(dir, tlsconfig.DevBundle)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := src.GetX509SVID()
		if s.ID != c.id {
			t.Errorf("%s holds %s, want %s", c.cert, s.ID, c.id)
		}
		if _, _, err := x509svid.Verify(s.Certificates, src); err != nil {
			t.Errorf("%s does not verify against the bundle: %v", c.cert, err)
		}
		fi, err := os.Stat(filepath.Join(dir, c.key))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", c.key, fi.Mode().Perm())
		}
	}
	if _, err := tlsconfig.WriteDevSet(dir, td, time.Hour, false); err == nil {
		t.Error("WriteDevSet overwrote an existing set without force")
	}
	if _, err := tlsconfig.WriteDevSet(dir, td, time.Hour, true); err != nil {
		t.Errorf("WriteDevSet with force: %v", err)
	}
}

// FuzzParsePolicy: flag values never panic the parser, and every ID it
// accepts gets the role its list gives.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range [][3]string{
		{"spiffe://example.org/peer", "example.org", "spiffe://example.org/op"},
		{"spiffe://a/b,spiffe://c/d", "x.y, z", ""},
		{" , ", "spiffe://td", "spiffe://td/op,"},
		{"spiffe://EXAMPLE.org/x", "bad domain", "https://x/y"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, peers, tds, ops string) {
		p, err := tlsconfig.ParsePolicy([]string{peers}, []string{tds}, []string{ops})
		if err != nil {
			return
		}
		for _, id := range p.Operators {
			if p.Role(id) != tlsconfig.RoleOperator {
				t.Fatalf("operator %s has role %s", id, p.Role(id))
			}
		}
		for _, id := range p.Peers {
			if p.Role(id) < tlsconfig.RolePeer {
				t.Fatalf("peer %s has role %s", id, p.Role(id))
			}
		}
	})
}

func TestPeerHTTPClient(t *testing.T) {
	ca := newCA(t, td)
	srv := source(mint(t, ca, srvID, tlsconfig.SVIDOptions{}), ca.Bundle())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, ok, err := tlsconfig.PeerID(r.TLS)
			if err != nil || !ok {
				http.Error(w, "no peer", http.StatusUnauthorized)
				return
			}
			io.WriteString(w, id.String())
		}),
		TLSConfig: tlsconfig.ServerConfig(srv),
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	go hs.ServeTLS(ln, "", "")
	defer hs.Close()
	url := "https://" + ln.Addr().String() + "/"
	me := source(mint(t, ca, peerID, tlsconfig.SVIDOptions{}), ca.Bundle())
	for _, c := range []struct {
		name string
		peer spiffeid.ID
		ok   bool
	}{
		{"expected server ID", srvID, true},
		{"any server of our trust domain", spiffeid.ID{}, true},
		{"another server ID", spiffeid.RequireFromPath(td, "/other"), false},
	} {
		resp, err := tlsconfig.PeerHTTPClient(me, c.peer).Get(url)
		if !c.ok {
			if err == nil {
				resp.Body.Close()
				t.Errorf("%s: accepted", c.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != peerID.String() {
			t.Errorf("%s: the server saw %q", c.name, b)
		}
	}
}
