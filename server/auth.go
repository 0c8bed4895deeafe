package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/loopback"
	"github.com/agentd/agentd/tlsconfig"
)

// How a caller authenticated.
const (
	AuthMTLS  = "mtls"     // an X.509 SVID verified in the TLS handshake
	AuthJWT   = "jwt-svid" // a JWT-SVID bearer token
	AuthToken = "token"    // a static bearer token
	AuthNone  = "none"     // no credentials: loopback development mode only
)

// Identity is an authenticated caller. It implements a2asrv.User, so the
// executor finds it in the call context and records it on the task. It is
// immutable.
type Identity struct {
	ID   string         // the SPIFFE ID, token:NAME for a static token, "" when anonymous
	Auth string         // AuthMTLS, AuthJWT, AuthToken or AuthNone
	Role tlsconfig.Role // what the caller may do
}

// Name returns the caller's identity (a2asrv.User).
func (i *Identity) Name() string { return i.ID }

// Authenticated reports whether the caller presented credentials (a2asrv.User).
func (i *Identity) Authenticated() bool { return i.Auth != AuthNone }

// AuthMethod returns how the caller authenticated.
func (i *Identity) AuthMethod() string { return i.Auth }

// Operator reports whether the caller may call the a2a.* methods.
func (i *Identity) Operator() bool { return i != nil && i.Role == tlsconfig.RoleOperator }

type identityKey struct{}

// IdentityFrom returns the caller's identity stored by the authentication
// middleware.
func IdentityFrom(ctx context.Context) (*Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(*Identity)
	return id, ok
}

// WithIdentity returns ctx carrying id, both for IdentityFrom and as the user
// of a fresh a2asrv call context with the request's headers (the Authorization
// header left out, so no credential travels further).
func WithIdentity(ctx context.Context, id *Identity, h http.Header) context.Context {
	// NewRequestMeta copies what it is given: copy here only to leave the
	// credential out.
	meta := map[string][]string(h)
	for k := range h {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			meta = make(map[string][]string, len(h))
			for k, v := range h {
				if http.CanonicalHeaderKey(k) != "Authorization" {
					meta[k] = v
				}
			}
			break
		}
	}
	ctx = context.WithValue(ctx, identityKey{}, id)
	ctx, cc := a2asrv.WithCallContext(ctx, a2asrv.NewRequestMeta(meta))
	cc.User = id
	return ctx
}

// Auth authenticates and authorizes callers of the JSON-RPC endpoint. A caller
// is identified by, in order: a bearer token in the Authorization header (a
// static token, else a JWT-SVID when JWT is set), else the SPIFFE ID of the
// client certificate verified in the handshake, else (Open only) as an
// anonymous peer (the local operator, see localOperator). No usable
// credentials: 401. A verified identity the policy does not allow: 403.
// Either answer closes the connection (Connection: close). An operator whose
// request carries a cross-site signal (crossSite) is served as a peer.
// Read-only after construction; safe for concurrent use.
// The zero value refuses every caller.
type Auth struct {
	// Source verifies JWT-SVIDs (its JWT bundles, and its own SPIFFE ID as the
	// required audience). Client certificates are verified in the handshake by
	// tlsconfig.ServerConfig, not here.
	Source tlsconfig.Source
	// JWT accepts JWT-SVID bearer tokens; it needs Source.
	JWT bool
	// Policy gives SPIFFE IDs (from certificates and JWT-SVIDs) their role.
	Policy tlsconfig.Policy
	// Tokens are the static bearer tokens, each with its own role.
	Tokens *Tokens
	// Open admits callers without credentials as anonymous peers: the loopback
	// development mode, when neither TLS nor a tokens file is configured (a
	// tokens file that holds no tokens is not the development mode). The local
	// user, a request from a loopback peer addressed to a loopback Host with
	// the listener's port and without a cross-site signal, is the operator
	// (localOperator).
	Open bool
	Log  *slog.Logger
}

// Middleware authenticates each request before next sees it.
func (a *Auth) Middleware(next http.Handler) http.Handler {
	log := a.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, status, reason := a.authenticate(r)
		if status != 0 {
			log.Warn("request refused", "status", status, "reason", reason, "spiffe_id", id.ID, "remote", r.RemoteAddr)
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="agentd"`)
			}
			// A caller that could not authenticate holds no connection
			// open: it is closed after this answer.
			refuse(w, r, status, reason)
			return
		}
		if id.Operator() && crossSite(r) {
			// A browser may hold an operator's credentials; a page of another
			// origin must not use them (docs/security.md).
			id = &Identity{ID: id.ID, Auth: id.Auth, Role: tlsconfig.RolePeer}
			log.Debug("operator role not granted to a cross-site request", "spiffe_id", id.ID, "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		}
		if log.Enabled(r.Context(), slog.LevelDebug) { // its attributes are built only for a record kept
			log.Debug("request authenticated", "spiffe_id", id.ID, "auth", id.Auth, "role", id.Role.String())
		}
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id, r.Header)))
	})
}

// authenticate returns the caller's identity, or an HTTP status and a reason.
// The client certificate's outcome is kept for the request's connection
// when the server keeps one (connAuth): found on its first request, not on
// every one.
func (a *Auth) authenticate(r *http.Request) (*Identity, int, string) {
	return a.authenticateOn(r, connIdentityOf(r.Context(), a))
}

// connAuthKey carries a connection's connAuth in the contexts of its
// requests (withConnAuth, ConnLimits.Server's ConnContext).
type connAuthKey struct{}

// connAuth is what one HTTP connection's client certificate makes of its
// caller, for each Auth that served a request of it (connIdentity): a
// connection's TLS state is the same for all its requests, HTTP/1.1 ones in
// turn and HTTP/2 ones at once. It is safe for concurrent use.
type connAuth struct {
	mu   sync.Mutex
	auth *Auth         // the first Auth to ask (the service has one)
	id   *connIdentity // its outcome
	more map[*Auth]*connIdentity
}

// withConnAuth returns a connection's context (http.Server.ConnContext)
// carrying a connAuth for its requests.
func withConnAuth(ctx context.Context) context.Context {
	return context.WithValue(ctx, connAuthKey{}, &connAuth{})
}

// connIdentityOf returns the connIdentity for a of the connection whose
// request context is ctx, or nil when its server keeps none.
func connIdentityOf(ctx context.Context, a *Auth) *connIdentity {
	ca, _ := ctx.Value(connAuthKey{}).(*connAuth)
	if ca == nil {
		return nil
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	switch {
	case ca.auth == nil:
		ca.auth, ca.id = a, new(connIdentity)
		return ca.id
	case ca.auth == a:
		return ca.id
	}
	if ca.more == nil {
		ca.more = make(map[*Auth]*connIdentity)
	}
	id := ca.more[a]
	if id == nil {
		id = new(connIdentity)
		ca.more[a] = id
	}
	return id
}

// authenticateOn is authenticate for a request on a connection whose client
// certificate's outcome conn keeps (nil: found anew for this request). A
// bearer token is checked on every request all the same.
func (a *Auth) authenticateOn(r *http.Request, conn *connIdentity) (*Identity, int, string) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, _ := strings.Cut(h, " ")
		token = strings.TrimSpace(token)
		if !strings.EqualFold(scheme, "Bearer") || token == "" {
			return &Identity{}, http.StatusUnauthorized, "unsupported Authorization header: want Bearer TOKEN"
		}
		if role, name, ok := a.Tokens.Lookup(token); ok {
			return &Identity{ID: "token:" + name, Auth: AuthToken, Role: role}, 0, ""
		}
		if !a.JWT || a.Source == nil || strings.Count(token, ".") != 2 {
			return &Identity{}, http.StatusUnauthorized, "invalid bearer token"
		}
		svid, err := tlsconfig.VerifyJWTSVID(a.Source, token)
		if err != nil {
			return &Identity{}, http.StatusUnauthorized, "invalid bearer token: " + err.Error()
		}
		return a.authorize(&Identity{ID: svid.ID.String(), Auth: AuthJWT, Role: a.Policy.Role(svid.ID)})
	}
	if id, status, reason, ok := conn.peer(a, r.TLS); ok {
		return id, status, reason
	}
	if a.Open {
		role := tlsconfig.RolePeer
		if localOperator(r) {
			role = tlsconfig.RoleOperator
		}
		return &Identity{Auth: AuthNone, Role: role}, 0, ""
	}
	return &Identity{}, http.StatusUnauthorized, "authentication required: a client certificate (SPIFFE X.509 SVID) or a bearer token"
}

// connIdentity is what one connection's client certificate, verified in its
// handshake, makes of its caller for one Auth: the identity, or the refusal.
// A connection's TLS state cannot change once its handshake is done, nor can
// an Auth's Policy, so it is found on the connection's first request that
// carries no bearer token and kept for the rest (the gRPC binding's
// connections, splitTLSInfo; an HTTP connection's, connAuth). The zero
// value is ready; nil keeps nothing.
type connIdentity struct {
	once   sync.Once
	id     *Identity
	status int
	reason string
	ok     bool // a certificate was presented
}

// peer returns the identity (or refusal) of the client certificate in cs,
// and ok false when there is none; conn, unless nil, keeps the outcome of
// the first call for the connection cs is of.
func (conn *connIdentity) peer(a *Auth, cs *tls.ConnectionState) (*Identity, int, string, bool) {
	if conn == nil {
		return a.peerIdentity(cs)
	}
	conn.once.Do(func() { conn.id, conn.status, conn.reason, conn.ok = a.peerIdentity(cs) })
	return conn.id, conn.status, conn.reason, conn.ok
}

// peerIdentity is the caller the client certificate in cs names, authorized
// by the policy; ok false when there is no certificate.
func (a *Auth) peerIdentity(cs *tls.ConnectionState) (*Identity, int, string, bool) {
	id, ok, err := tlsconfig.PeerID(cs)
	if err != nil {
		return &Identity{}, http.StatusUnauthorized, err.Error(), true
	}
	if !ok {
		return nil, 0, "", false
	}
	ident, status, reason := a.authorize(&Identity{ID: id.String(), Auth: AuthMTLS, Role: a.Policy.Role(id)})
	return ident, status, reason, true
}

func (a *Auth) authorize(id *Identity) (*Identity, int, string) {
	if id.Role == tlsconfig.RoleNone {
		return id, http.StatusForbidden, id.ID + " is not allowed to call this service"
	}
	return id, 0, ""
}

// LogOperatorCall is the message of the audit record every a2a.* call
// leaves, whoever calls and however it ends: method; the caller (spiffe_id:
// its SPIFFE ID, token:NAME, or "" for the anonymous caller of the
// development mode; caller_auth: mtls, jwt-svid, token or none; role);
// outcome: ok, error (the method failed: bad params, a refused value) or
// refused (the caller is not an operator and got -32601); unless ok, code
// (the JSON-RPC error code) and err; and params, the params as sent (at most
// maxAuditParams bytes); target, what it acts on (a2a.Cancel's handle,
// a2a.CloseBreaker's key; "" for the service-wide methods). ok and error are
// logged at info, refused at warn. An operator's actions are also stored
// (Operator.Audit, audit.go).
const LogOperatorCall = "operator call"

// maxAuditParams bounds the params an audit record quotes.
const maxAuditParams = 512

// operatorOnly wraps the operator methods so that any caller without the
// operator role gets -32601, as if the method did not exist; every call is
// logged to log (LogOperatorCall).
func operatorOnly(methods map[string]Method, log *slog.Logger) map[string]Method {
	out := make(map[string]Method, len(methods))
	for name, m := range methods {
		out[name] = func(ctx context.Context, params json.RawMessage) (any, error) {
			id, _ := IdentityFrom(ctx)
			if !id.Operator() {
				err := &RPCError{Code: CodeMethodNotFound, Message: "method not found: " + name}
				auditCall(ctx, log, name, id, params, "refused", err)
				return nil, err
			}
			res, err := m(ctx, params)
			outcome := "ok"
			if err != nil {
				outcome = "error"
			}
			auditCall(ctx, log, name, id, params, outcome, err)
			return res, err
		}
	}
	return out
}

// auditCall logs one operator call (LogOperatorCall).
func auditCall(ctx context.Context, log *slog.Logger, method string, id *Identity, params json.RawMessage, outcome string, err error) {
	if id == nil {
		id = &Identity{}
	}
	p := string(bytes.TrimSpace(params))
	if len(p) > maxAuditParams {
		p = p[:maxAuditParams] + "..."
	}
	attrs := []any{"method", method, "spiffe_id", id.ID, "caller_auth", id.Auth, "role", id.Role.String(), "target", auditTarget(method, params), "outcome", outcome, "params", p}
	level := slog.LevelInfo
	if outcome == "refused" {
		level = slog.LevelWarn
	}
	if err != nil {
		attrs = append(attrs, "code", toRPCError(err).Code, "err", err.Error())
	}
	log.Log(ctx, level, LogOperatorCall, attrs...)
}

// checkOrigin refuses a request whose Origin header names anything but a
// loopback host (403, package loopback decides; the connection is closed after
// it): a browser page elsewhere must not drive this service.
// Requests without an Origin header (every non-browser client) pass.
func checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !loopback.URL(o) {
			refuse(w, r, http.StatusForbidden, "cross-origin request refused: Origin "+o+" is not a loopback origin")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers a refused caller (a 401 or 403) with status and msg, and
// closes the connection after the answer. Connection: close alone is not
// enough while the request's body is still arriving: the server would read on
// (up to 256 KiB, until the body deadline) before it closes, or, without that
// header, before it even answers. So the connection's read deadline is moved
// to now: the server's reads of the rest fail at once, the answer goes out,
// and the connection closes.
func refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	w.Header().Set("Connection", "close")
	if r.ContentLength != 0 { // a body, of a length or chunked, not read
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	httpError(w, status, msg)
}

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write([]byte(msg + "\n"))
}

var (
	_ a2asrv.User        = (*Identity)(nil)
	_ tasks.OperatorUser = (*Identity)(nil)
)
