package server

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/jwtbundle"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/agentd/agentd/a2a/store/postgres"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/spiffetest"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/tlsconfig"
)

// auditServer is an HTTPS listener on loopback serving the real operator
// methods, over audit, to mTLS and bearer callers (operatorID and the token
// "admin" are operators; peerID and "ci" peers).
type auditServer struct {
	url  string
	f    *authFixture // its CA and client credentials
	logs *testkit.Buffer
}

func newAuditServer(t *testing.T, audit tasks.Auditor, instance string) *auditServer {
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
	tokens, err := ParseTokens([]byte(peerToken + " peer ci\n" + operatorToken + " operator admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	sup, err := supervisor.New(supervisor.Config{Executable: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	lg := slog.New(slog.NewJSONHandler(logs, nil))
	op := &Operator{Sup: sup, Drain: NewDrainer(time.Second, nil), LameDuck: NewLameDuck(), Audit: audit, Instance: instance, Log: lg}
	h := Handler(Config{Methods: op.Methods(), Log: lg, Auth: &Auth{
		Source: src, JWT: true, Tokens: tokens, Log: lg,
		Policy: tlsconfig.Policy{Peers: []spiffeid.ID{peerID}, Operators: []spiffeid.ID{operatorID}},
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: tlsconfig.ServerConfig(src), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return &auditServer{url: "https://" + ln.Addr().String() + "/", f: &authFixture{ca: ca, bundle: ca.Bundle()}, logs: logs}
}

// call makes one JSON-RPC call with client c (and header hdr).
func (s *auditServer) call(t *testing.T, c *http.Client, hdr map[string]string, method, params string) rpcReply {
	t.Helper()
	r, err := do(t, c, s.url, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`, hdr)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != http.StatusOK {
		t.Fatalf("%s: HTTP %d %s", method, r.status, r.body)
	}
	return r.rpc
}

func auditPage(t *testing.T, r rpcReply) api.AuditResult {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("a2a.Audit: %+v", r.Error)
	}
	var res api.AuditResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// Every operator action leaves a record in the store's trail with the
// caller's identity (an mTLS SPIFFE ID, a bearer token's name), the method,
// its target and outcome (issue 34.4: operator actions left no record an
// operator could query), reads included; a2a.Audit itself and calls
// refused to peers are logged, not stored. a2a.Audit
// serves the trail to operators only, newest first, paged by its cursor;
// bad params (a limit out of bounds, a cursor it did not issue, an
// overlong filter, an unknown field) are -32602, and hostile filter text
// matches nothing.
func TestAuditTrail(t *testing.T) {
	trail := tasks.NewMemoryStore(10, time.Hour)
	s := newAuditServer(t, trail, "replica-1")
	opTLS := s.f.client(s.f.svid(t, operatorID, tlsconfig.SVIDOptions{}))
	peerTLS := s.f.client(s.f.svid(t, peerID, tlsconfig.SVIDOptions{}))
	plain := s.f.client(nil)
	admin, ci := bearerHdr(operatorToken), bearerHdr(peerToken)

	must := func(r rpcReply, code int) {
		t.Helper()
		if code == 0 && r.Error != nil || code != 0 && (r.Error == nil || r.Error.Code != code) {
			t.Fatalf("reply %+v (%s), want code %d", r.Error, r.Result, code)
		}
	}
	must(s.call(t, opTLS, nil, api.OpPause, `{}`), 0)
	must(s.call(t, plain, admin, api.OpCancel, `{"handle":"no-such-task","reason":"test"}`), 0)
	must(s.call(t, plain, admin, api.OpCaps, `{"max_depth":"deep"}`), CodeInvalidParams)
	must(s.call(t, opTLS, nil, api.OpCloseBreaker, `{"key":"warm-pool"}`), 0)
	must(s.call(t, opTLS, nil, api.OpTree, `{}`), 0)
	must(s.call(t, opTLS, nil, api.OpCaps, `{}`), 0)
	must(s.call(t, peerTLS, nil, api.OpPause, `{}`), CodeMethodNotFound)
	must(s.call(t, peerTLS, nil, api.OpAudit, `{}`), CodeMethodNotFound)
	must(s.call(t, plain, ci, api.OpAudit, `{}`), CodeMethodNotFound)

	page := auditPage(t, s.call(t, plain, admin, api.OpAudit, `{"limit":3}`))
	rest := auditPage(t, s.call(t, opTLS, nil, api.OpAudit, `{"limit":3,"before":"`+page.Next+`"}`))
	if page.Next == "" || rest.Next != "" || len(page.Records) != 3 || len(rest.Records) != 3 {
		t.Fatalf("pages %+v then %+v, want 3 and 3 records (the six calls)", page, rest)
	}
	type rec struct{ caller, method, target, outcome string }
	want := []rec{
		{operatorID.String(), api.OpCaps, "", "ok"},
		{operatorID.String(), api.OpTree, "", "ok"},
		{operatorID.String(), api.OpCloseBreaker, "warm-pool", "ok"},
		{"token:admin", api.OpCaps, "", "error"},
		{"token:admin", api.OpCancel, "no-such-task", "ok"},
		{operatorID.String(), api.OpPause, "", "ok"},
	}
	for i, r := range append(page.Records, rest.Records...) {
		if got := (rec{r.Caller, r.Method, r.Target, r.Outcome}); got != want[i] || r.Instance != "replica-1" || r.Time.IsZero() {
			t.Errorf("record %d: %+v, want %+v on replica-1", i, r, want[i])
		}
	}
	if d := rest.Records[0].Detail; !strings.Contains(d, "max_depth") {
		t.Errorf("the error's record says %q, not the error", d)
	}
	if d := rest.Records[1].Detail; d != `{"handle":"no-such-task","reason":"test"}` {
		t.Errorf("the cancel's record says %q, not its params", d)
	}

	if got := auditPage(t, s.call(t, opTLS, nil, api.OpAudit, `{"caller":"`+operatorID.String()+`"}`)); len(got.Records) != 4 {
		t.Errorf("by caller: %+v", got.Records)
	}
	if got := auditPage(t, s.call(t, opTLS, nil, api.OpAudit, `{"method":"a2a.Cancel","caller":"token:admin"}`)); len(got.Records) != 1 {
		t.Errorf("by method and caller: %+v", got.Records)
	}
	for _, hostile := range []string{`' OR 1=1 --`, `%`, `\u0000`, `a2a.Pause\"`, `<script>`} {
		if got := auditPage(t, s.call(t, opTLS, nil, api.OpAudit, `{"method":"`+hostile+`"}`)); len(got.Records) != 0 {
			t.Errorf("method %s matched %+v", hostile, got.Records)
		}
	}
	for _, bad := range []string{`{"limit":-1}`, `{"limit":501}`, `{"before":"junk"}`, `{"caller":"` + strings.Repeat("x", 2000) + `"}`, `{"order":"asc"}`, `[]`} {
		must(s.call(t, opTLS, nil, api.OpAudit, bad), CodeInvalidParams)
	}
	if all := auditPage(t, s.call(t, opTLS, nil, api.OpAudit, `{"limit":500}`)); len(all.Records) != 6 {
		t.Fatalf("after the refusals and the trail's own reads: %d records, want the 6 calls", len(all.Records))
	}
	// The log record of each call names its target.
	if !strings.Contains(s.logs.String(), `"method":"a2a.Cancel","spiffe_id":"token:admin","caller_auth":"token","role":"operator","target":"no-such-task","outcome":"ok"`) {
		t.Errorf("no log record of the cancel with its target:\n%s", s.logs.String())
	}
}

// Replicas on one PostgreSQL share the trail: an action through one
// replica is listed by a2a.Audit through the other, naming the replica
// that served it.
func TestAuditTrailAcrossReplicas(t *testing.T) {
	dsn := pgtest.Start(t).Database(t)
	open := func() *postgres.Store {
		st, err := postgres.Open(context.Background(), dsn, postgres.Options{LeaseTTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := newAuditServer(t, open(), "replica-a"), newAuditServer(t, open(), "replica-b")
	opTLS := a.f.client(a.f.svid(t, operatorID, tlsconfig.SVIDOptions{}))
	if r := a.call(t, opTLS, nil, api.OpLameDuck, `{}`); r.Error != nil {
		t.Fatal(r.Error)
	}
	plain := b.f.client(nil)
	got := auditPage(t, b.call(t, plain, bearerHdr(operatorToken), api.OpAudit, `{}`))
	if len(got.Records) != 1 || got.Records[0].Method != api.OpLameDuck || got.Records[0].Caller != operatorID.String() || got.Records[0].Instance != "replica-a" {
		t.Fatalf("replica b lists %+v, want replica a's a2a.LameDuck by %s", got.Records, operatorID)
	}
}
