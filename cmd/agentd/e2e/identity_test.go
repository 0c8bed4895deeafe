package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/agentd/agentd/internal/spiffetest"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/tlsconfig"
)

// devCerts runs `agentd certs init` into a new folder and returns it with
// the CA loaded for minting more.
func devCerts(t *testing.T, td string) (string, *tlsconfig.DevCA) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	out, err := agentdCommand(t, "certs", "init", "--trust-domain", td, "--dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("certs init: %v\n%s", err, out)
	}
	ca, err := tlsconfig.LoadDevCA(filepath.Join(dir, tlsconfig.DevCACert), filepath.Join(dir, tlsconfig.DevCAKey))
	if err != nil {
		t.Fatal(err)
	}
	return dir, ca
}

// mtlsClient is an HTTP client presenting svid (none when nil) and verifying
// the server as spiffe://TD/agentd against ca.
func mtlsClient(ca *tlsconfig.DevCA, svid *x509svid.SVID) *http.Client {
	return spiffeClient(ca, svid, spiffeid.RequireFromPath(ca.TrustDomain, "/agentd").String())
}

// spiffeClient is an HTTP client presenting svid (none when nil) and
// accepting only a server with the SPIFFE ID server, verified against ca.
func spiffeClient(ca *tlsconfig.DevCA, svid *x509svid.SVID, server string) *http.Client {
	var src x509svid.Source // a nil *SVID must stay a nil interface
	if svid != nil {
		src = svid
	}
	return tlsconfig.NewHTTPClient(tlsconfig.ClientConfig(src, ca.Bundle(), spiffetls.AuthorizeID(spiffeid.RequireFromString(server))))
}

func loadSVID(t *testing.T, dir, cert, key string) *x509svid.SVID {
	t.Helper()
	s, err := x509svid.Load(filepath.Join(dir, cert), filepath.Join(dir, key))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type rpcResult struct {
	status int
	body   string
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rpc posts one JSON-RPC call and decodes the reply (when the status is 200).
func callRPC(t *testing.T, c *http.Client, url, method string, params any, hdr map[string]string) (rpcResult, error) {
	t.Helper()
	req := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method}
	if params != nil {
		req["params"] = params
	}
	b, _ := json.Marshal(req)
	return postRPC(t, c, url, b, hdr)
}

func postRPC(t *testing.T, c *http.Client, url string, body []byte, hdr map[string]string) (rpcResult, error) {
	t.Helper()
	hr, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		hr.Header.Set(k, v)
	}
	resp, err := c.Do(hr)
	if err != nil {
		return rpcResult{}, err
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	r := rpcResult{status: resp.StatusCode, body: string(rb)}
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(rb, &r); err != nil {
			t.Fatalf("not a JSON-RPC reply: %s", rb)
		}
	}
	return r, nil
}

func sendParams(text string, blocking bool) map[string]any {
	return map[string]any{
		"message":       map[string]any{"messageId": fmt.Sprintf("m-%d", time.Now().UnixNano()), "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}},
		"configuration": map[string]any{"blocking": blocking},
	}
}

func probe(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// probeClient is a kubelet-like HTTPS client: no certificate, verifies nothing.
var probeClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// TestIdentityMatrixAgainstTheBinary runs the real binary with dev SVIDs,
// bearer tokens and a JWT bundle, and checks each caller gets its specified
// answer.
func TestIdentityMatrixAgainstTheBinary(t *testing.T) {
	t.Parallel()
	dir, ca := devCerts(t, "example.org")
	td := ca.TrustDomain
	jwtAuth, err := spiffetest.NewJWTAuthority(td)
	if err != nil {
		t.Fatal(err)
	}
	jwtBundle := filepath.Join(dir, "jwt-bundle.json")
	if err := jwtAuth.WriteBundle(jwtBundle); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	os.WriteFile(tokens, []byte("peer-token-0123456789 peer ci\noperator-token-0123456789 operator admin\n"), 0o600)
	p := startService(t,
		"--tls-cert", filepath.Join(dir, "server.pem"), "--tls-key", filepath.Join(dir, "server-key.pem"), "--tls-bundle", filepath.Join(dir, "bundle.pem"),
		"--jwt-bundle", jwtBundle, "--bearer-tokens-file", tokens, "--health-listen", "127.0.0.1:0",
		"--allow-peer", "spiffe://example.org/peer", "--operator", "spiffe://example.org/operator")
	if !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("url %q is not https", p.url)
	}
	peer := mtlsClient(ca, loadSVID(t, dir, "peer.pem", "peer-key.pem"))
	operator := mtlsClient(ca, loadSVID(t, dir, "operator.pem", "operator-key.pem"))
	mint := func(id string, opt tlsconfig.SVIDOptions) *x509svid.SVID {
		s, err := ca.MintX509SVID(spiffeid.RequireFromString(id), opt)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	foreignCA, err := tlsconfig.NewDevCA(spiffeid.RequireTrustDomainFromString("other.org"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := foreignCA.MintX509SVID(spiffeid.RequireFromString("spiffe://other.org/peer"), tlsconfig.SVIDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	jwt := func(aud string, exp time.Time) map[string]string {
		tok, err := jwtAuth.Mint(spiffeid.RequireFromString("spiffe://example.org/peer"), []string{aud}, exp)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{"Authorization": "Bearer " + tok}
	}
	send, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": sendParams("one two", true)})
	tree := []byte(`{"jsonrpc":"2.0","id":1,"method":"a2a.Tree"}`)
	big := []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"pad":"` + strings.Repeat("x", 9<<20) + `"}}`)

	for _, c := range []struct {
		name      string
		client    *http.Client
		body      []byte
		hdr       map[string]string
		handshake bool
		status    int
		code      int
	}{
		{name: "no client certificate", client: mtlsClient(ca, nil), body: send, status: 401},
		{name: "certificate from another trust domain", client: mtlsClient(ca, foreign), body: send, handshake: true},
		{name: "ID not allowed", client: mtlsClient(ca, mint("spiffe://example.org/stranger", tlsconfig.SVIDOptions{})), body: send, status: 403},
		{name: "expired certificate", client: mtlsClient(ca, mint("spiffe://example.org/peer", tlsconfig.SVIDOptions{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)})), body: send, handshake: true},
		{name: "JWT with the wrong audience", client: mtlsClient(ca, nil), body: send, hdr: jwt("spiffe://example.org/not-agentd", now.Add(time.Hour)), status: 401},
		{name: "expired JWT", client: mtlsClient(ca, nil), body: send, hdr: jwt("spiffe://example.org/agentd", now.Add(-time.Minute)), status: 401},
		{name: "operator method from a peer identity", client: peer, body: tree, status: 200, code: -32601},
		{name: "non-loopback Origin", client: peer, body: send, hdr: map[string]string{"Origin": "https://attacker.example"}, status: 403},
		{name: "9 MiB body", client: peer, body: big, status: 413},
		{name: "peer sends work", client: peer, body: send, status: 200},
		{name: "JWT-SVID sends work", client: mtlsClient(ca, nil), body: send, hdr: jwt("spiffe://example.org/agentd", now.Add(time.Hour)), status: 200},
		{name: "static token sends work", client: mtlsClient(ca, nil), body: send, hdr: map[string]string{"Authorization": "Bearer peer-token-0123456789"}, status: 200},
		{name: "operator reads the tree", client: operator, body: tree, status: 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := postRPC(t, c.client, p.url, c.body, c.hdr)
			if c.handshake {
				if err == nil {
					t.Fatalf("status %d; want a failed TLS handshake", r.status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.status != c.status {
				t.Fatalf("status %d (%s), want %d", r.status, strings.TrimSpace(r.body), c.status)
			}
			if c.code != 0 && (r.Error == nil || r.Error.Code != c.code) {
				t.Fatalf("error %+v, want code %d", r.Error, c.code)
			}
			if c.status == 200 && c.code == 0 && r.Error != nil {
				t.Fatalf("error %+v", r.Error)
			}
		})
	}

	// The caller's identity is on the task, read back with a2a-go's client.
	ctx := context.Background()
	card, err := agentcard.NewResolver(peer).Resolve(ctx, p.url)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := card.SecuritySchemes["mtls"]; !ok || len(card.Security) != 2 {
		t.Fatalf("the card does not declare mTLS and bearer: %+v %+v", card.SecuritySchemes, card.Security)
	}
	if _, ok := card.SecuritySchemes["bearer"]; !ok {
		t.Fatalf("the card does not declare bearer: %+v", card.SecuritySchemes)
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(peer))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()
	res, err := client.SendMessage(ctx, textMessage("who am i"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	if task.Metadata["agentd/caller"] != "spiffe://example.org/peer" || task.Metadata["agentd/caller_auth"] != "mtls" {
		t.Fatalf("task metadata %v", task.Metadata)
	}
	if !strings.Contains(p.logs.String(), `"spiffe_id":"spiffe://example.org/stranger"`) {
		t.Error("the refusal of the stranger is not logged with its spiffe_id")
	}

	// Probes: HTTPS without a client certificate on the health listener.
	if p.health == "" {
		t.Fatal("no health listener")
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code := probe(t, probeClient, "https://"+p.health+path); code != 200 {
			t.Errorf("%s: %d", path, code)
		}
	}
	resp, err := probeClient.Post("https://"+p.health+"/", "application/json", bytes.NewReader(send))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 && resp.StatusCode != 405 {
		t.Errorf("the health listener served the A2A endpoint: %d", resp.StatusCode)
	}

	// agentd ctl and agentd send with the dev certificates, the server's
	// SPIFFE ID pinned.
	const serverID = "spiffe://example.org/agentd"
	opCreds := []string{"--tls-cert", filepath.Join(dir, "operator.pem"), "--tls-key", filepath.Join(dir, "operator-key.pem"), "--tls-bundle", filepath.Join(dir, "bundle.pem")}
	out, err := agentdCommand(t, append([]string{"ctl", "a2a.Caps", "--to", p.url, "--json", "--server-id", serverID}, opCreds...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"max_depth": 4`) {
		t.Fatalf("ctl a2a.Caps: %v\n%s", err, out)
	}
	// Without the pin, neither presents its credentials (exit 2, naming the
	// settings); with --insecure-any-server-id, any ID of the trust domain
	// will do.
	for _, args := range [][]string{
		append([]string{"ctl", "a2a.Caps", "--to", p.url}, opCreds...),
		append([]string{"send", "--to", p.url}, append(opCreds, "hello")...),
	} {
		cmd := agentdCommand(t, args...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "--server-id") || !strings.Contains(string(out), "--insecure-any-server-id") {
			t.Fatalf("%s without --server-id: %v\n%s", args[0], err, out)
		}
	}
	out, err = agentdCommand(t, append([]string{"ctl", "a2a.Caps", "--to", p.url, "--json", "--insecure-any-server-id"}, opCreds...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"max_depth": 4`) {
		t.Fatalf("ctl --insecure-any-server-id: %v\n%s", err, out)
	}
	out, err = agentdCommand(t, "ctl", "tree", "--to", p.url, "--server-id", serverID,
		"--tls-cert", filepath.Join(dir, "peer.pem"), "--tls-key", filepath.Join(dir, "peer-key.pem"), "--tls-bundle", filepath.Join(dir, "bundle.pem")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "-32601") {
		t.Fatalf("ctl as a peer: %v\n%s", err, out)
	}
	tokenFile := filepath.Join(dir, "op-token")
	os.WriteFile(tokenFile, []byte("operator-token-0123456789\n"), 0o600)
	out, err = agentdCommand(t, "ctl", "a2a.Tree", "--to", p.url, "--token-file", tokenFile,
		"--tls-bundle", filepath.Join(dir, "bundle.pem"), "--server-id", serverID).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "live subagents") {
		t.Fatalf("ctl with a bearer token: %v\n%s", err, out)
	}
	out, err = agentdCommand(t, "send", "--to", p.url, "--server-id", serverID,
		"--tls-cert", filepath.Join(dir, "peer.pem"), "--tls-key", filepath.Join(dir, "peer-key.pem"), "--tls-bundle", filepath.Join(dir, "bundle.pem"), "three little words").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "has 3 words") {
		t.Fatalf("send over mTLS: %v\n%s", err, out)
	}
}

func TestIdentityConfigErrorsExit2(t *testing.T) {
	t.Parallel()
	dir, _ := devCerts(t, "example.org")
	cert, key, bundle := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, "bundle.pem")
	for _, c := range []struct {
		args []string
		env  string
		name string
	}{
		{[]string{"serve", "--listen", "0.0.0.0:0"}, "", "--listen"},
		{[]string{"serve", "--tls-cert", cert}, "", "--tls-key"},
		{[]string{"serve", "--tls-cert", key, "--tls-key", key, "--tls-bundle", bundle}, "", "--tls-cert"},
		{[]string{"serve", "--tls-cert", cert, "--tls-key", key, "--tls-bundle", bundle, "--spiffe-socket", "/tmp/x.sock"}, "", "--spiffe-socket"},
		{[]string{"serve", "--tls-cert", cert, "--tls-key", key, "--tls-bundle", bundle}, "SPIFFE_ENDPOINT_SOCKET=unix:///tmp/x.sock", "--spiffe-socket"},
		{[]string{"serve", "--jwt-bundle", bundle}, "", "--jwt-bundle"},
		{[]string{"serve", "--allow-peer", "spiffe://example.org/peer"}, "", "--allow-peer"},
		{[]string{"serve", "--tls-cert", cert, "--tls-key", key, "--tls-bundle", bundle, "--operator", "not-an-id"}, "", "--operator"},
		{[]string{"serve", "--tls-cert", cert, "--tls-key", key, "--tls-bundle", bundle}, "AGENT_ALLOW_TRUST_DOMAIN=Bad Domain", "--allow-trust-domain"},
		{[]string{"serve", "--bearer-tokens-file", bundle}, "", "--bearer-tokens-file"},
		{[]string{"serve", "--spiffe-socket", "http://nope"}, "", "--spiffe-socket"},
		{[]string{"certs", "init", "--dir", dir}, "", "--trust-domain"},
		{[]string{"ctl", "a2a.Explode", "--to", "http://127.0.0.1:1"}, "", "a2a.Explode"},
		{[]string{"ctl", "caps", "--to", "https://127.0.0.1:1"}, "", "--tls-bundle"},
		{[]string{"ctl", "caps", "--to", "http://127.0.0.1:1", "--timeout", "0s"}, "", "--timeout"},
		{[]string{"send", "--to", "http://127.0.0.1:1", "--timeout", "-1s", "hi"}, "", "--timeout"},
	} {
		wantUsageError(t, c.env, c.name, c.args...)
	}
	// With TLS, any listen address is fine.
	p := startService(t, "--listen", "0.0.0.0:0", "--tls-cert", cert, "--tls-key", key, "--tls-bundle", bundle, "--allow-trust-domain", "example.org")
	if !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("url %s", p.url)
	}
}

// TestWorkloadAPIRotationUnderLoad: agentd takes its SVID from a (fake)
// Workload API; /readyz waits for the first SVID; a rotation under a steady
// stream of requests fails none of them, and new connections see the new
// certificate.
func TestWorkloadAPIRotationUnderLoad(t *testing.T) {
	t.Parallel()
	sockDir, err := os.MkdirTemp("", "wl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	api, err := spiffetest.StartWorkloadAPI(filepath.Join(sockDir, "api.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	td := spiffeid.RequireTrustDomainFromString("example.org")
	ca, err := tlsconfig.NewDevCA(td, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serverID := spiffeid.RequireFromPath(td, "/agentd")
	svid := func() *x509svid.SVID {
		s, err := ca.MintX509SVID(serverID, tlsconfig.SVIDOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// The socket comes from the standard environment variable.
	// A generous --drain-grace: on a loaded machine a child may take more than
	// the fast flags' 200ms to exit after its result, which the supervisor
	// would call a crash; this test is about TLS, not that race.
	p := startServiceAs(t, agentdBin, []string{"SPIFFE_ENDPOINT_SOCKET=" + api.Addr}, "--health-listen", "127.0.0.1:0", "--allow-peer", "spiffe://example.org/peer", "--drain-grace", "5s")
	if code := probe(t, probeClient, "https://"+p.health+"/healthz"); code != 200 {
		t.Fatalf("/healthz before the first SVID: %d", code)
	}
	if code := probe(t, probeClient, "https://"+p.health+"/readyz"); code != 503 {
		t.Fatalf("/readyz before the first SVID: %d, want 503", code)
	}
	first := svid()
	api.SetX509(first, ca.Bundle())
	testkit.WaitFor(t, 10*time.Second, "ready after the first SVID", func() bool {
		return probe(t, probeClient, "https://"+p.health+"/readyz") == 200
	})

	peer, err := ca.MintX509SVID(spiffeid.RequireFromPath(td, "/peer"), tlsconfig.SVIDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Two clients: one keeps its connection, one dials anew for every request.
	keep := mtlsClient(ca, peer)
	fresh := mtlsClient(ca, peer)
	fresh.Transport.(*http.Transport).DisableKeepAlives = true
	var sawSerial sync.Map // serial string -> true, from fresh connections
	var failures, sent atomic.Int64
	var failMsgs sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range []*http.Client{keep, fresh} {
		wg.Add(1)
		go func(c *http.Client) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": sendParams("rotate me", true)})
				req, _ := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(b))
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				sent.Add(1)
				if err != nil {
					failures.Add(1)
					failMsgs.Store(err.Error(), true)
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"completed"`)) {
					failures.Add(1)
					failMsgs.Store(fmt.Sprintf("%d %s", resp.StatusCode, body), true)
					continue
				}
				if c == fresh {
					sawSerial.Store(resp.TLS.PeerCertificates[0].SerialNumber.String(), true)
				}
			}
		}(c)
	}
	has := func(s *x509svid.SVID) func() bool {
		return func() bool { _, ok := sawSerial.Load(s.Certificates[0].SerialNumber.String()); return ok }
	}
	// Keep a steady load: at least 20 more requests after each step.
	more := func(what string) {
		n := sent.Load() + 20
		testkit.WaitFor(t, 30*time.Second, what, func() bool { return sent.Load() >= n })
	}
	testkit.WaitFor(t, 20*time.Second, "requests on the first certificate", has(first))
	more("load before the rotation")
	second := svid()
	api.SetX509(second, ca.Bundle())
	testkit.WaitFor(t, 20*time.Second, "a new connection with the rotated certificate", has(second))
	more("load after the rotation")
	third := svid()
	api.SetX509(third, ca.Bundle())
	testkit.WaitFor(t, 20*time.Second, "a new connection with the second rotation", has(third))
	more("load after the second rotation")
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		var msgs []string
		failMsgs.Range(func(k, _ any) bool { msgs = append(msgs, k.(string)); return true })
		t.Fatalf("%d of %d requests failed across the rotations: %v", n, sent.Load(), msgs)
	}
	t.Logf("%d requests, none failed, across two rotations", sent.Load())
	testkit.WaitFor(t, 10*time.Second, "the rotation in the log", func() bool { return strings.Contains(p.logs.String(), "X.509 SVID rotated") })
	// The service never restarted: one process throughout.
	if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatal(err)
	}
}
