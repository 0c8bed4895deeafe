package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/spiffe/go-spiffe/v2/bundle/jwtbundle"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/secretfile"
	"github.com/agentd/agentd/internal/spiffetest"
	"github.com/agentd/agentd/supervisor/delegate"
	"github.com/agentd/agentd/tlsconfig"
)

var (
	testTD     = spiffeid.RequireTrustDomainFromString("example.org")
	serverID   = spiffeid.RequireFromPath(testTD, "/agentd")
	peerID     = spiffeid.RequireFromPath(testTD, "/peer")
	operatorID = spiffeid.RequireFromPath(testTD, "/operator")
	strangerID = spiffeid.RequireFromPath(testTD, "/stranger")
)

const (
	peerToken     = "peer-token-0123456789"
	operatorToken = "operator-token-0123456789"
)

// echoProvider completes every delegation at once with the objective.
type echoProvider struct{}

func (echoProvider) Name() string { return "local" }
func (echoProvider) Capabilities() delegate.Capabilities {
	return delegate.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}
}
func (echoProvider) InheritsParentContext() bool { return false }
func (echoProvider) Start(ctx context.Context, req delegate.Request) (delegate.Run, error) {
	return doneRun{id: req.Handle, res: api.SubagentResult{Status: api.StatusCompleted, Distillate: api.InlineText("echo: " + req.Payload.Contract.Objective)}}, nil
}

type doneRun struct {
	id  string
	res api.SubagentResult
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (r doneRun) ID() string                 { return r.id }
func (r doneRun) Done() <-chan struct{}      { return closedCh }
func (r doneRun) Result() api.SubagentResult { return r.res }
func (r doneRun) Cancel(string)              {}

// authFixture is an HTTPS server with the real handler, the real executor and
// authentication, and the credentials to call it.
type authFixture struct {
	url    string
	ca     *tlsconfig.DevCA
	jwt    *spiffetest.JWTAuthority
	bundle *x509bundle.Bundle
	split  *Split
	src    *spiffetest.Source // the server's
}

func newAuthFixture(t *testing.T) *authFixture {
	t.Helper()
	ca, err := tlsconfig.NewDevCA(testTD, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	jwtAuth, err := spiffetest.NewJWTAuthority(testTD)
	if err != nil {
		t.Fatal(err)
	}
	svid, err := ca.MintX509SVID(serverID, tlsconfig.SVIDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := &spiffetest.Source{}
	src.Set(svid, []*x509bundle.Bundle{ca.Bundle()}, []*jwtbundle.Bundle{jwtAuth.Bundle()})
	tokens, err := ParseTokens([]byte("# test tokens\n" + peerToken + " peer ci\n" + operatorToken + " operator admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	router := &delegate.Router{}
	if err := router.Register(echoProvider{}); err != nil {
		t.Fatal(err)
	}
	exec := a2abind.NewExecutor(a2abind.ExecutorConfig{Router: router, Limits: api.Limits{MaxSteps: 1, MaxTokens: 100, Deadline: api.Duration(time.Minute), MaxChildren: 1}})
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), exec, nil)
	cfg := Config{
		Handler: engine,
		Card:    a2abind.Card(a2abind.CardConfig{Name: "t", URL: "https://x/"}),
		Methods: map[string]Method{"a2a.Tree": func(ctx context.Context, _ json.RawMessage) (any, error) {
			id, _ := IdentityFrom(ctx)
			return map[string]string{"caller": id.ID}, nil
		}},
		Auth: &Auth{
			Source: src,
			JWT:    true,
			Policy: tlsconfig.Policy{Peers: []spiffeid.ID{peerID}, Operators: []spiffeid.ID{operatorID}},
			Tokens: tokens,
		},
	}
	// Served as agentd serves it: the listener split between the HTTP
	// server and the gRPC binding's own server.
	addr, _, split := splitFront(t, cfg, ConnLimits{}, tlsconfig.ServerConfig(src))
	return &authFixture{url: "https://" + addr + "/", ca: ca, jwt: jwtAuth, bundle: ca.Bundle(), split: split, src: src}
}

func (f *authFixture) svid(t *testing.T, id spiffeid.ID, opt tlsconfig.SVIDOptions) *x509svid.SVID {
	t.Helper()
	s, err := f.ca.MintX509SVID(id, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// client returns an HTTP client presenting svid (none when nil) that
// verifies the server as serverID.
func (f *authFixture) client(svid *x509svid.SVID) *http.Client {
	var src x509svid.Source
	if svid != nil {
		src = svid
	}
	return tlsconfig.NewHTTPClient(tlsconfig.ClientConfig(src, f.bundle, spiffetls.AuthorizeID(serverID)))
}

const sendBody = `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`
const treeBody = `{"jsonrpc":"2.0","id":2,"method":"a2a.Tree"}`

type reply struct {
	status int
	body   string
	rpc    rpcReply
	header http.Header
}

func do(t *testing.T, c *http.Client, url, body string, hdr map[string]string) (reply, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, body: string(b), header: resp.Header}
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &r.rpc); err != nil {
			t.Fatalf("bad JSON-RPC reply %q: %v", b, err)
		}
	}
	return r, nil
}

func bearerHdr(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

// TestAuthNegativeMatrix pins the rejection each kind of bad caller gets.
func TestAuthNegativeMatrix(t *testing.T) {
	f := newAuthFixture(t)
	foreignCA, err := tlsconfig.NewDevCA(spiffeid.RequireTrustDomainFromString("other.org"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := foreignCA.MintX509SVID(spiffeid.RequireFromString("spiffe://other.org/peer"), tlsconfig.SVIDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	peer := f.client(f.svid(t, peerID, tlsconfig.SVIDOptions{}))
	now := time.Now()
	mintJWT := func(aud string, exp time.Time) string {
		tok, err := f.jwt.Mint(peerID, []string{aud}, exp)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	cases := []struct {
		name      string
		client    *http.Client
		body      string
		hdr       map[string]string
		handshake bool // the TLS handshake itself must fail
		status    int
		rpcCode   int
	}{
		{name: "no client certificate", client: f.client(nil), body: sendBody, status: 401},
		{name: "certificate from another trust domain", client: f.client(foreign), body: sendBody, handshake: true},
		{name: "ID not allowed", client: f.client(f.svid(t, strangerID, tlsconfig.SVIDOptions{})), body: sendBody, status: 403},
		{name: "expired certificate", client: f.client(f.svid(t, peerID, tlsconfig.SVIDOptions{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)})), body: sendBody, handshake: true},
		{name: "JWT with the wrong audience", client: f.client(nil), body: sendBody, hdr: bearerHdr(mintJWT("spiffe://example.org/someone-else", now.Add(time.Hour))), status: 401},
		{name: "expired JWT", client: f.client(nil), body: sendBody, hdr: bearerHdr(mintJWT(serverID.String(), now.Add(-time.Minute))), status: 401},
		{name: "unknown static token", client: f.client(nil), body: sendBody, hdr: bearerHdr("not-a-token-0123456789"), status: 401},
		{name: "basic auth", client: f.client(nil), body: sendBody, hdr: map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}, status: 401},
		{name: "operator method from a peer identity", client: peer, body: treeBody, status: 200, rpcCode: CodeMethodNotFound},
		{name: "operator method from a peer token", client: f.client(nil), body: treeBody, hdr: bearerHdr(peerToken), status: 200, rpcCode: CodeMethodNotFound},
		{name: "non-loopback Origin", client: peer, body: sendBody, hdr: map[string]string{"Origin": "https://evil.example.com"}, status: 403},
		{name: "null Origin", client: peer, body: sendBody, hdr: map[string]string{"Origin": "null"}, status: 403},
		{name: "9 MiB body", client: peer, body: `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"pad":"` + strings.Repeat("x", 9<<20) + `"}}`, status: 413},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := do(t, c.client, f.url, c.body, c.hdr)
			if c.handshake {
				var uerr interface{ Timeout() bool }
				if err == nil {
					t.Fatalf("request succeeded with status %d; want a failed handshake", r.status)
				}
				if errors.As(err, &uerr) && uerr.Timeout() {
					t.Fatalf("timed out instead of failing the handshake: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.status != c.status {
				t.Fatalf("status %d (%s), want %d", r.status, strings.TrimSpace(r.body), c.status)
			}
			if c.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge")
			}
			if c.rpcCode != 0 && (r.rpc.Error == nil || r.rpc.Error.Code != c.rpcCode) {
				t.Fatalf("rpc error %+v, want code %d", r.rpc.Error, c.rpcCode)
			}
		})
	}
}

// TestAuthAcceptsAndRecordsTheCaller checks every accepted credential, and that
// the caller's identity reaches the executor and lands on the task.
func TestAuthAcceptsAndRecordsTheCaller(t *testing.T) {
	f := newAuthFixture(t)
	jwtTok, err := f.jwt.Mint(peerID, []string{serverID.String()}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name         string
		client       *http.Client
		hdr          map[string]string
		caller, auth string
		operator     bool
	}{
		{"mTLS peer", f.client(f.svid(t, peerID, tlsconfig.SVIDOptions{})), nil, peerID.String(), AuthMTLS, false},
		{"mTLS operator", f.client(f.svid(t, operatorID, tlsconfig.SVIDOptions{})), nil, operatorID.String(), AuthMTLS, true},
		{"JWT-SVID", f.client(nil), bearerHdr(jwtTok), peerID.String(), AuthJWT, false},
		{"static peer token", f.client(nil), bearerHdr(peerToken), "token:ci", AuthToken, false},
		{"static operator token", f.client(nil), bearerHdr(operatorToken), "token:admin", AuthToken, true},
		{"loopback Origin", f.client(f.svid(t, peerID, tlsconfig.SVIDOptions{})), map[string]string{"Origin": "http://localhost:3000"}, peerID.String(), AuthMTLS, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A message of its own: a messageId the same caller sent before
			// would return the earlier task (idempotent sends).
			body := strings.Replace(sendBody, `"m1"`, `"m1-`+c.name+`"`, 1)
			r, err := do(t, c.client, f.url, body, c.hdr)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != 200 || r.rpc.Error != nil {
				t.Fatalf("status %d, error %+v, body %s", r.status, r.rpc.Error, r.body)
			}
			var task a2a.Task
			if err := json.Unmarshal(r.rpc.Result, &task); err != nil {
				t.Fatal(err)
			}
			if task.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("task %s", task.Status.State)
			}
			if got := task.Metadata[api.MetaCaller]; got != c.caller {
				t.Errorf("task caller %v, want %s", got, c.caller)
			}
			if got := task.Metadata[api.MetaCallerAuth]; got != c.auth {
				t.Errorf("task caller_auth %v, want %s", got, c.auth)
			}
			r, err = do(t, c.client, f.url, treeBody, c.hdr)
			if err != nil {
				t.Fatal(err)
			}
			if c.operator {
				if r.rpc.Error != nil || !strings.Contains(string(r.rpc.Result), c.caller) {
					t.Fatalf("operator call: %+v %s", r.rpc.Error, r.rpc.Result)
				}
			} else if r.rpc.Error == nil || r.rpc.Error.Code != CodeMethodNotFound {
				t.Fatalf("non-operator call: %+v", r.rpc)
			}
		})
	}
}

// TestAuthSpoofedCallerMetadata checks that a client cannot name itself on the
// task through the message's metadata.
func TestAuthSpoofedCallerMetadata(t *testing.T) {
	f := newAuthFixture(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"metadata":{"agentd/caller":"spiffe://example.org/operator","agentd/caller_auth":"mtls"},"message":{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"hello"}]}}}`
	r, err := do(t, f.client(nil), f.url, body, bearerHdr(peerToken))
	if err != nil || r.rpc.Error != nil {
		t.Fatal(err, r.rpc.Error)
	}
	var task a2a.Task
	if err := json.Unmarshal(r.rpc.Result, &task); err != nil {
		t.Fatal(err)
	}
	if got := task.Metadata[api.MetaCaller]; got != "token:ci" {
		t.Fatalf("task caller %v, want token:ci", got)
	}
}

func TestOpenModeIsAnonymousPeer(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), doneExec{}, nil)
	called := false
	h := Handler(Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"}),
		Methods: map[string]Method{"a2a.Tree": func(context.Context, json.RawMessage) (any, error) { called = true; return "x", nil }}})
	_, r := post(t, h, treeBody)
	if r.Error == nil || r.Error.Code != CodeMethodNotFound || called {
		t.Fatalf("anonymous operator call: %+v (called %v)", r.Error, called)
	}
	_, r = post(t, h, sendBody)
	if r.Error != nil {
		t.Fatalf("anonymous send: %+v", r.Error)
	}
}

func TestParseTokens(t *testing.T) {
	good := "# comment\n\n  tok-aaaaaaaaaaaaaaaa   peer   alice \nTOK-bbbbbbbbbbbbbbbb operator bob\n"
	toks, err := ParseTokens([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if toks.Len() != 2 {
		t.Fatalf("%d tokens", toks.Len())
	}
	if role, name, ok := toks.Lookup("TOK-bbbbbbbbbbbbbbbb"); !ok || role != tlsconfig.RoleOperator || name != "bob" {
		t.Fatalf("Lookup = %v %q %v", role, name, ok)
	}
	if _, _, ok := toks.Lookup("tok-aaaaaaaaaaaaaaa"); ok {
		t.Fatal("a prefix of a token matched")
	}
	for _, bad := range []string{
		"short peer x\n",
		"tok-aaaaaaaaaaaaaaaa admin x\n",
		"tok-aaaaaaaaaaaaaaaa peer\n",
		"tok-aaaaaaaaaaaaaaaa peer x extra\n",
		"tok-aaaaaaaaaaaaaaaa peer x\ntok-aaaaaaaaaaaaaaaa operator y\n",
		"tok-aaaaaaaaaaaaaaaa peer x\ntok-cccccccccccccccc operator x\n",
	} {
		if _, err := ParseTokens([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line ") {
			t.Errorf("ParseTokens(%q) = %v, want an error naming the line", bad, err)
		}
	}
	path := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(path, []byte("x peer y\n"), 0o600)
	if _, err := LoadTokens(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadTokens error %v does not name the file", err)
	}
}

// FuzzParseTokens: the parser never panics, and whatever it accepts looks up
// by the exact token text.
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		"tok-aaaaaaaaaaaaaaaa peer alice\n",
		"# c\n\ntok-aaaaaaaaaaaaaaaa operator bob\r\ntok-bbbbbbbbbbbbbbbb peer carol",
		"x y z", "\x00\x00 peer n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		toks, err := ParseTokens(data)
		if err != nil {
			return
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			fields := strings.Fields(string(line))
			if len(fields) != 3 || strings.HasPrefix(fields[0], "#") {
				continue
			}
			if _, name, ok := toks.Lookup(fields[0]); !ok || name != fields[2] {
				panic(fmt.Sprintf("accepted token %q does not look up (got %q, %v)", fields[0], name, ok))
			}
		}
	})
}

// A tokens file its group or others may open is refused, naming the file and
// its mode; 0600 (and 0400) are fine.
func TestTokensFileMode(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o644, false}, {0o640, os.Getuid() == 0}, {0o604, false}, {0o660, false}, {0o700, true}} {
		path := filepath.Join(dir, fmt.Sprintf("tokens-%o", tc.mode))
		if err := os.WriteFile(path, []byte("tok-aaaaaaaaaaaaaaaa peer x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadTokens(path)
		if tc.ok != (err == nil) {
			t.Errorf("mode %04o: %v", tc.mode, err)
		}
		if err != nil && (!errors.Is(err, secretfile.ErrMode) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("%04o", tc.mode))) {
			t.Errorf("mode %04o: the error %q does not name the file and its mode", tc.mode, err)
		}
	}
	// Through a symbolic link (a Kubernetes secret volume), the file's mode
	// counts.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "tokens-644"), link); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTokens(link); !errors.Is(err, secretfile.ErrMode) {
		t.Errorf("a link to a 0644 file: %v", err)
	}
}

// Replace swaps the whole set: the old tokens stop working, the new ones
// work, through the same *Tokens an Auth holds.
func TestTokensReplace(t *testing.T) {
	old, err := ParseTokens([]byte("tok-aaaaaaaaaaaaaaaa peer alice\n"))
	if err != nil {
		t.Fatal(err)
	}
	next, err := ParseTokens([]byte("tok-bbbbbbbbbbbbbbbb operator bob\ntok-cccccccccccccccc peer carol\n"))
	if err != nil {
		t.Fatal(err)
	}
	old.Replace(next)
	if _, _, ok := old.Lookup("tok-aaaaaaaaaaaaaaaa"); ok {
		t.Error("a replaced token still works")
	}
	if role, name, ok := old.Lookup("tok-bbbbbbbbbbbbbbbb"); !ok || name != "bob" || role != tlsconfig.RoleOperator || old.Len() != 2 {
		t.Errorf("the new token: %v %q %v, %d tokens", role, name, ok, old.Len())
	}
	var zero Tokens
	if zero.Len() != 0 {
		t.Error("the zero Tokens holds tokens")
	}
	if _, _, ok := zero.Lookup("tok-bbbbbbbbbbbbbbbb"); ok {
		t.Error("the zero Tokens knows a token")
	}
}
