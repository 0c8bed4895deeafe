package peer

import (
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/agentd/agentd/internal/loopback"
)

// Config describes one remote A2A peer.
type Config struct {
	// Name is the peer's name; its provider is Prefix+Name.
	Name string
	// URL is the peer's base URL; its agent card is read from
	// /.well-known/agent-card.json under it.
	URL string
	// SPIFFEID is the identity the peer must present (mTLS); the HTTP client
	// builder enforces it.
	SPIFFEID string
	// BearerTokenFile holds a bearer token sent on every request; re-read when
	// the file changes.
	BearerTokenFile string
	// Timeout bounds each unary call to the peer (card, send, get, cancel) and
	// the connection setup; it never cuts a stream. Default 30s.
	Timeout time.Duration
	// Version, if set, pins the protocol version the peer is called in
	// ("0.3" or "1.0"); else the newest its card offers that agentd calls.
	Version string
	// Binding, if set, pins the protocol binding ("JSONRPC", "HTTP+JSON",
	// "GRPC"); else the first in the card's order that agentd calls.
	Binding string
	Log     *slog.Logger
}

// Versions and Bindings are the values a peer's version= and binding= may
// take.
var (
	Versions = []string{"0.3", "1.0"}
	Bindings = []string{"JSONRPC", "HTTP+JSON", "GRPC"}
)

// Validate checks a peer's configuration: a name, an absolute http(s) URL,
// plain http only to a loopback host.
func (c Config) Validate() error {
	if c.Name == "" || strings.ContainsAny(c.Name, " =,:/") {
		return fmt.Errorf("peer name %q: want a non-empty name without spaces, '=', ',', ':' or '/'", c.Name)
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("peer %s: URL %q: want http(s)://host[:port][/path]", c.Name, c.URL)
	}
	if u.Scheme == "http" {
		if !loopback.Host(u.Hostname()) {
			return fmt.Errorf("peer %s: plain http is only allowed to a loopback host; use https for %s", c.Name, u.Host)
		}
	}
	if c.Version != "" && !slices.Contains(Versions, c.Version) {
		return fmt.Errorf("peer %s: version=%q: want one of %s", c.Name, c.Version, strings.Join(Versions, ", "))
	}
	if c.Binding != "" && !slices.Contains(Bindings, c.Binding) {
		return fmt.Errorf("peer %s: binding=%q: want one of %s", c.Name, c.Binding, strings.Join(Bindings, ", "))
	}
	if c.Timeout < 0 {
		return fmt.Errorf("peer %s: negative timeout", c.Name)
	}
	if c.SPIFFEID != "" {
		if _, err := spiffeid.FromString(c.SPIFFEID); err != nil {
			return fmt.Errorf("peer %s: spiffe=%q: %w", c.Name, c.SPIFFEID, err)
		}
		if u.Scheme != "https" {
			return fmt.Errorf("peer %s: spiffe= is checked over mTLS, which needs an https URL (got %s)", c.Name, c.URL)
		}
	}
	return nil
}

// ParseSpec parses a peer as the --peer flag writes it:
//
//	NAME=URL[,spiffe=SPIFFE_ID][,token-file=PATH][,timeout=DURATION][,version=0.3|1.0][,binding=JSONRPC|HTTP+JSON|GRPC]
//
// and validates it (Config.Validate).
func ParseSpec(s string) (Config, error) {
	fields := strings.Split(s, ",")
	name, rawURL, ok := strings.Cut(fields[0], "=")
	if !ok {
		return Config{}, fmt.Errorf("peer %q: want NAME=URL[,spiffe=ID][,token-file=PATH][,timeout=DURATION][,version=V][,binding=B]", s)
	}
	c := Config{Name: strings.TrimSpace(name), URL: strings.TrimSpace(rawURL)}
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || v == "" {
			return Config{}, fmt.Errorf("peer %s: option %q: want KEY=VALUE", c.Name, f)
		}
		if seen[k] {
			return Config{}, fmt.Errorf("peer %s: option %s given twice", c.Name, k)
		}
		seen[k] = true
		switch k {
		case "spiffe":
			if !strings.HasPrefix(v, "spiffe://") {
				return Config{}, fmt.Errorf("peer %s: spiffe=%q: want spiffe://TRUST_DOMAIN/PATH", c.Name, v)
			}
			c.SPIFFEID = v
		case "token-file":
			c.BearerTokenFile = v
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return Config{}, fmt.Errorf("peer %s: timeout=%q: want a positive duration", c.Name, v)
			}
			c.Timeout = d
		case "version":
			c.Version = v
		case "binding":
			c.Binding = strings.ToUpper(v)
		default:
			return Config{}, fmt.Errorf("peer %s: unknown option %q (want spiffe, token-file, timeout, version or binding)", c.Name, k)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}
