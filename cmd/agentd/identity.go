package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"

	"github.com/agentd/agentd/internal/bearer"
	"github.com/agentd/agentd/internal/loopback"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/tlsconfig"
)

// identityFlags are serve's TLS, authentication and authorization settings.
type identityFlags struct {
	cert, key, bundle *string
	spiffeSocket      *string
	jwtBundle         *string
	tokensFile        *string
	healthListen      *string
	allowPeer         *listValue
	allowTD           *listValue
	operator          *listValue
}

func addIdentity(f *flags) *identityFlags {
	return &identityFlags{
		cert:         f.string("tls-cert", "AGENT_TLS_CERT", "", "PEM file: this service's X.509 SVID (leaf first); re-read when it changes"),
		key:          f.string("tls-key", "AGENT_TLS_KEY", "", "PEM file: the SVID's private key"),
		bundle:       f.string("tls-bundle", "AGENT_TLS_BUNDLE", "", "PEM file: the trust bundle (CA certificates) of this trust domain"),
		spiffeSocket: f.string("spiffe-socket", "SPIFFE_ENDPOINT_SOCKET", "", "SPIFFE Workload API address (unix:///path or a path): SVIDs and bundles, rotated without a restart"),
		jwtBundle:    f.string("jwt-bundle", "AGENT_JWT_BUNDLE", "", "JWKS file: JWT-SVID signing keys of this trust domain, to accept JWT-SVID bearer tokens (with --tls-cert; the Workload API supplies its own)"),
		tokensFile:   f.string("bearer-tokens-file", "AGENT_BEARER_TOKENS_FILE", "", "file of static bearer tokens, one \"TOKEN ROLE NAME\" per line (ROLE: peer or operator)"),
		healthListen: f.string("health-listen", "AGENT_HEALTH_LISTEN", "", "a separate listener serving only /healthz and /readyz (HTTPS without client certificates when TLS is on)"),
		allowPeer:    f.list("allow-peer", "AGENT_ALLOW_PEER", "a SPIFFE ID allowed to send work"),
		allowTD:      f.list("allow-trust-domain", "AGENT_ALLOW_TRUST_DOMAIN", "a trust domain whose every SPIFFE ID may send work"),
		operator:     f.list("operator", "AGENT_OPERATOR", "a SPIFFE ID allowed to call the a2a.* operator methods (and to send work)"),
	}
}

// identity is what serve runs with: the source (nil without TLS) and the
// authenticator.
type identity struct {
	src  tlsconfig.Source
	auth *server.Auth
	mode string // for the log: workload-api, files, or plain
}

// build validates the settings and builds the identity. Every error is a usage
// error naming the setting. listen is checked here: plain http only on
// loopback.
func (c *identityFlags) build(listen string, log *slog.Logger) (*identity, error) {
	files := *c.cert != "" || *c.key != "" || *c.bundle != ""
	if files && (*c.cert == "" || *c.key == "" || *c.bundle == "") {
		return nil, usageError("--tls-cert, --tls-key and --tls-bundle go together (got cert %q, key %q, bundle %q)", *c.cert, *c.key, *c.bundle)
	}
	if files && *c.spiffeSocket != "" {
		return nil, usageError("--spiffe-socket (or SPIFFE_ENDPOINT_SOCKET) and --tls-cert/--tls-key/--tls-bundle are two identity sources: choose one")
	}
	if *c.jwtBundle != "" && !files {
		return nil, usageError("--jwt-bundle needs --tls-cert/--tls-key/--tls-bundle (the JWT audience is this service's SPIFFE ID; with --spiffe-socket the Workload API supplies JWT bundles)")
	}
	if *c.healthListen != "" {
		if _, _, err := net.SplitHostPort(*c.healthListen); err != nil {
			return nil, usageError("--health-listen %q: %v", *c.healthListen, err)
		}
	}
	policy, err := tlsconfig.ParsePolicy(c.allowPeer.vals, c.allowTD.vals, c.operator.vals)
	if err != nil {
		return nil, usageError("--allow-peer/--allow-trust-domain/--operator: %v", err)
	}
	var tokens *server.Tokens
	if *c.tokensFile != "" {
		if tokens, err = server.LoadTokens(*c.tokensFile); err != nil {
			return nil, usageError("--bearer-tokens-file: %v", err)
		}
	}
	tlsOn := files || *c.spiffeSocket != ""
	if !tlsOn {
		if !policy.Empty() {
			return nil, usageError("--allow-peer, --allow-trust-domain and --operator name SPIFFE IDs, which need TLS (--spiffe-socket or --tls-cert/--tls-key/--tls-bundle)")
		}
		isLoopback, err := loopback.HostPort(listen)
		if err != nil {
			return nil, usageError("--listen: %v", err)
		}
		if !isLoopback {
			return nil, usageError("--listen %s: plain http is only allowed on a loopback address (127.0.0.1, ::1, localhost); configure TLS (--spiffe-socket or --tls-cert/--tls-key/--tls-bundle) to listen elsewhere", listen)
		}
	} else if _, _, err := net.SplitHostPort(listen); err != nil {
		return nil, usageError("--listen: %v", err)
	}
	id := &identity{mode: "plain", auth: &server.Auth{Policy: policy, Tokens: tokens, Open: !tlsOn && tokens.Len() == 0, Log: log}}
	switch {
	case *c.spiffeSocket != "":
		if _, err := tlsconfig.WorkloadAddress(*c.spiffeSocket); err != nil {
			return nil, usageError("--spiffe-socket: %v", err)
		}
		src, err := tlsconfig.NewWorkloadSource(*c.spiffeSocket, log)
		if err != nil {
			return nil, usageError("--spiffe-socket: %v", err)
		}
		id.src, id.mode = src, "workload-api"
		id.auth.JWT = true
	case files:
		src, err := tlsconfig.NewFileSource(tlsconfig.Files{Cert: *c.cert, Key: *c.key, Bundle: *c.bundle, JWTBundle: *c.jwtBundle}, log)
		if err != nil {
			return nil, usageError("--tls-cert/--tls-key/--tls-bundle/--jwt-bundle: %v", err)
		}
		id.src, id.mode = src, "files"
		id.auth.JWT = *c.jwtBundle != ""
	}
	id.auth.Source = id.src
	if tlsOn && policy.Empty() && tokens.Len() == 0 {
		log.Warn("TLS is on but no caller is allowed: set --allow-peer, --allow-trust-domain, --operator or --bearer-tokens-file")
	}
	return id, nil
}

// clientFlags are the credentials of agentd's clients (send, ctl).
type clientFlags struct {
	cert, key, bundle *string
	spiffeSocket      *string
	tokenFile         *string
	serverID          *string
}

func addClientFlags(f *flags) *clientFlags {
	return &clientFlags{
		cert:         f.string("tls-cert", "AGENT_TLS_CERT", "", "PEM file: the client's X.509 SVID, for mTLS"),
		key:          f.string("tls-key", "AGENT_TLS_KEY", "", "PEM file: the client SVID's private key"),
		bundle:       f.string("tls-bundle", "AGENT_TLS_BUNDLE", "", "PEM file: the trust bundle that verifies the server"),
		spiffeSocket: f.string("spiffe-socket", "SPIFFE_ENDPOINT_SOCKET", "", "SPIFFE Workload API address: the client's SVID and the bundles"),
		tokenFile:    f.string("token-file", "AGENT_TOKEN_FILE", "", "file holding a bearer token (a static token or a JWT-SVID)"),
		serverID:     f.string("server-id", "AGENT_SERVER_ID", "", "the SPIFFE ID the server must present (default: any ID of the client's trust domain)"),
	}
}

// httpClient builds the HTTP client for url: TLS from the SPIFFE settings for
// https, and the bearer token on every request. close releases a Workload API
// connection.
func (c *clientFlags) httpClient(ctx context.Context, url string, log *slog.Logger) (hc *http.Client, closeFn func(), err error) {
	closeFn = func() {}
	var token string
	if *c.tokenFile != "" {
		b, err := os.ReadFile(*c.tokenFile)
		if err != nil {
			return nil, closeFn, usageError("--token-file: %v", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, closeFn, usageError("--token-file %s is empty", *c.tokenFile)
		}
	}
	var authorize tlsconfig.Authorizer
	var serverTD spiffeid.TrustDomain
	if *c.serverID != "" {
		id, err := spiffeid.FromString(*c.serverID)
		if err != nil {
			return nil, closeFn, usageError("--server-id: %v", err)
		}
		authorize, serverTD = spiffetls.AuthorizeID(id), id.TrustDomain()
	}
	var tlsCfg *tls.Config
	if strings.HasPrefix(url, "https://") {
		files := *c.cert != "" || *c.key != ""
		switch {
		case *c.spiffeSocket != "" && !files:
			src, err := tlsconfig.NewWorkloadSource(*c.spiffeSocket, log)
			if err != nil {
				return nil, closeFn, usageError("--spiffe-socket: %v", err)
			}
			closeFn = func() { src.Close() }
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = tlsconfig.WaitReady(wctx, src)
			cancel()
			if err != nil {
				return nil, closeFn, fmt.Errorf("workload api %s: %w", *c.spiffeSocket, err)
			}
			if authorize == nil {
				own, _ := tlsconfig.OwnID(src)
				authorize = spiffetls.AuthorizeMemberOf(own.TrustDomain())
			}
			tlsCfg = tlsconfig.ClientConfig(src, src, authorize)
		case files:
			if *c.cert == "" || *c.key == "" || *c.bundle == "" {
				return nil, closeFn, usageError("--tls-cert, --tls-key and --tls-bundle go together")
			}
			src, err := tlsconfig.NewFileSource(tlsconfig.Files{Cert: *c.cert, Key: *c.key, Bundle: *c.bundle}, log)
			if err != nil {
				return nil, closeFn, usageError("--tls-cert/--tls-key/--tls-bundle: %v", err)
			}
			if authorize == nil {
				own, _ := tlsconfig.OwnID(src)
				authorize = spiffetls.AuthorizeMemberOf(own.TrustDomain())
			}
			tlsCfg = tlsconfig.ClientConfig(src, src, authorize)
		case *c.bundle != "":
			if authorize == nil {
				return nil, closeFn, usageError("--tls-bundle without a client SVID needs --server-id (the trust domain to verify the server in)")
			}
			bs, err := tlsconfig.NewBundleSource(serverTD, *c.bundle)
			if err != nil {
				return nil, closeFn, usageError("--tls-bundle: %v", err)
			}
			tlsCfg = tlsconfig.ClientConfig(nil, bs, authorize)
		default:
			return nil, closeFn, usageError("%s is https: give --tls-bundle (and --tls-cert/--tls-key for mTLS) or --spiffe-socket", url)
		}
	}
	hc = tlsconfig.NewHTTPClient(tlsCfg)
	if token != "" {
		hc.Transport = &bearer.Transport{Base: hc.Transport, Token: bearer.Static(token)}
	}
	return hc, closeFn, nil
}

// newClientLogger is the logger of the client commands: warnings and errors
// only, as text on stderr.
func newClientLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
