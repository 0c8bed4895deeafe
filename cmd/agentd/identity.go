package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/agentd/agentd/cmd/agentd/internal/cli"
	"github.com/agentd/agentd/internal/loopback"
	"github.com/agentd/agentd/server"
	"github.com/agentd/agentd/tlsconfig"
)

// identityConfig is serve's TLS, authentication and authorization settings.
type identityConfig struct {
	Cert, Key, Bundle string // --tls-cert, --tls-key, --tls-bundle
	SPIFFESocket      string
	JWTBundle         string
	TokensFile        string // --bearer-tokens-file
	HealthListen      string
	AllowPeer         []string
	AllowTrustDomain  []string
	Operator          []string
}

func addIdentity(f *cli.Flags, c *identityConfig) {
	f.EnvString(&c.Cert, "tls-cert", "AGENT_TLS_CERT", "", "PEM file: this service's X.509 SVID (leaf first); re-read when it changes")
	f.EnvString(&c.Key, "tls-key", "AGENT_TLS_KEY", "", "PEM file: the SVID's private key")
	f.EnvString(&c.Bundle, "tls-bundle", "AGENT_TLS_BUNDLE", "", "PEM file: the trust bundle (CA certificates) of this trust domain")
	f.EnvString(&c.SPIFFESocket, "spiffe-socket", "SPIFFE_ENDPOINT_SOCKET", "", "SPIFFE Workload API address (unix:///path or a path): SVIDs and bundles, rotated without a restart")
	f.EnvString(&c.JWTBundle, "jwt-bundle", "AGENT_JWT_BUNDLE", "", "JWKS file: JWT-SVID signing keys of this trust domain, to accept JWT-SVID bearer tokens (with --tls-cert; the Workload API supplies its own)")
	f.EnvString(&c.TokensFile, "bearer-tokens-file", "AGENT_BEARER_TOKENS_FILE", "", "file of static bearer tokens, one \"TOKEN ROLE NAME\" per line (ROLE: peer or operator)")
	f.EnvString(&c.HealthListen, "health-listen", "AGENT_HEALTH_LISTEN", "", "a separate listener serving only /healthz and /readyz (HTTPS without client certificates when TLS is on)")
	f.EnvList(&c.AllowPeer, "allow-peer", "AGENT_ALLOW_PEER", "a SPIFFE ID allowed to send work")
	f.EnvList(&c.AllowTrustDomain, "allow-trust-domain", "AGENT_ALLOW_TRUST_DOMAIN", "a trust domain whose every SPIFFE ID may send work")
	f.EnvList(&c.Operator, "operator", "AGENT_OPERATOR", "a SPIFFE ID allowed to call the a2a.* operator methods (and to send work)")
}

// files reports whether any of the three TLS files is set.
func (c *identityConfig) files() bool { return c.Cert != "" || c.Key != "" || c.Bundle != "" }

// tls reports whether the service serves HTTPS.
func (c *identityConfig) tls() bool { return c.files() || c.SPIFFESocket != "" }

// validate checks the settings and names the bad one; listen is --listen:
// plain http only on loopback.
func (c *identityConfig) validate(listen string) error {
	files := c.files()
	if files && (c.Cert == "" || c.Key == "" || c.Bundle == "") {
		return fmt.Errorf("--tls-cert, --tls-key and --tls-bundle go together (got cert %q, key %q, bundle %q)", c.Cert, c.Key, c.Bundle)
	}
	if files && c.SPIFFESocket != "" {
		return errors.New("--spiffe-socket (or SPIFFE_ENDPOINT_SOCKET) and --tls-cert/--tls-key/--tls-bundle are two identity sources: choose one")
	}
	if c.JWTBundle != "" && !files {
		return errors.New("--jwt-bundle needs --tls-cert/--tls-key/--tls-bundle (the JWT audience is this service's SPIFFE ID; with --spiffe-socket the Workload API supplies JWT bundles)")
	}
	if c.HealthListen != "" {
		if err := checkAddr("--health-listen", c.HealthListen); err != nil {
			return err
		}
	}
	policy, err := c.policy()
	if err != nil {
		return err
	}
	if c.SPIFFESocket != "" {
		if _, err := tlsconfig.WorkloadAddress(c.SPIFFESocket); err != nil {
			return fmt.Errorf("--spiffe-socket: %v", err)
		}
	}
	if err := checkAddr("--listen", listen); err != nil {
		return err
	}
	if c.tls() {
		return nil
	}
	if !policy.Empty() {
		return errors.New("--allow-peer, --allow-trust-domain and --operator name SPIFFE IDs, which need TLS (--spiffe-socket or --tls-cert/--tls-key/--tls-bundle)")
	}
	isLoopback, err := loopback.HostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen: %v", err)
	}
	if !isLoopback {
		return fmt.Errorf("--listen %s: plain http is only allowed on a loopback address (127.0.0.1, ::1, localhost); configure TLS (--spiffe-socket or --tls-cert/--tls-key/--tls-bundle) to listen elsewhere", listen)
	}
	return nil
}

func (c *identityConfig) policy() (tlsconfig.Policy, error) {
	policy, err := tlsconfig.ParsePolicy(c.AllowPeer, c.AllowTrustDomain, c.Operator)
	if err != nil {
		return policy, fmt.Errorf("--allow-peer/--allow-trust-domain/--operator: %v", err)
	}
	return policy, nil
}

// identity is what serve runs with: the source (nil without TLS) and the
// authenticator.
type identity struct {
	src  tlsconfig.Source
	auth *server.Auth
	mode string // for the log: workload-api, files, or plain
}

// openIdentity reads the bearer tokens and opens the identity source: the
// Workload API (which connects in the background) or the TLS files. An error
// is bad config naming the setting.
func openIdentity(c *identityConfig, log *slog.Logger) (*identity, error) {
	policy, err := c.policy()
	if err != nil {
		return nil, cli.UsageError("%v", err)
	}
	var tokens *server.Tokens
	if c.TokensFile != "" {
		if tokens, err = server.LoadTokens(c.TokensFile); err != nil {
			return nil, cli.UsageError("--bearer-tokens-file: %v", err)
		}
	}
	tlsOn := c.tls()
	// A tokens file given is tokens mode, even while it holds no tokens: the
	// development mode (Open) is only for a service configured with no
	// credentials at all, so a file emptied by mistake, or filled later by
	// SIGHUP, never opens the service to anonymous callers.
	id := &identity{mode: "plain", auth: &server.Auth{Policy: policy, Tokens: tokens, Open: !tlsOn && c.TokensFile == "", Log: log}}
	if c.TokensFile != "" && tokens.Len() == 0 {
		log.Warn("the bearer tokens file holds no tokens: no bearer token is accepted until SIGHUP reloads it with some"+noTokensNote(tlsOn),
			"file", c.TokensFile)
	}
	switch {
	case c.SPIFFESocket != "":
		src, err := tlsconfig.NewWorkloadSource(c.SPIFFESocket, log)
		if err != nil {
			return nil, cli.UsageError("--spiffe-socket: %v", err)
		}
		id.src, id.mode = src, "workload-api"
		id.auth.JWT = true
	case c.files():
		src, err := tlsconfig.NewFileSource(tlsconfig.Files{Cert: c.Cert, Key: c.Key, Bundle: c.Bundle, JWTBundle: c.JWTBundle}, log)
		if err != nil {
			return nil, cli.UsageError("--tls-cert/--tls-key/--tls-bundle/--jwt-bundle: %v", err)
		}
		id.src, id.mode = src, "files"
		id.auth.JWT = c.JWTBundle != ""
	}
	id.auth.Source = id.src
	if tlsOn && policy.Empty() && tokens.Len() == 0 {
		log.Warn("TLS is on but no caller is allowed: set --allow-peer, --allow-trust-domain, --operator or --bearer-tokens-file")
	}
	return id, nil
}

// noTokensNote is the end of the warning about an empty tokens file: without
// TLS, tokens are the only credentials.
func noTokensNote(tlsOn bool) string {
	if tlsOn {
		return ""
	}
	return " (without TLS, every request is refused with 401 until then)"
}

// ready reports whether the identity source has its SVID (always without TLS).
func (id *identity) ready() bool { return id.src == nil || id.src.Ready() }

// close releases the source.
func (id *identity) close() {
	if id.src != nil {
		id.src.Close()
	}
}

// checkAddr checks a listen address given by the flag name: host:port, the
// port a number in [0, 65535] or a service name.
func checkAddr(name, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return fmt.Errorf("%s %q: want host:port, the port in [0, 65535]: %v", name, addr, err)
	}
	return nil
}
