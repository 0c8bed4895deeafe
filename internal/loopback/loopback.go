// Package loopback decides whether a host, a host:port address or a URL names
// only this machine's loopback interface. It is the boundary that decides
// where agentd allows plain http (a listener without TLS, a peer, an MCP
// server) and which browser origins it serves, so where a form is in doubt
// it refuses.
//
// Loopback is:
//
//   - the name localhost, in any case, with at most one trailing dot
//     ("LOCALHOST", "localhost."); no other name, not even a subdomain of
//     localhost, since names are not resolved here;
//   - an IPv4 literal in 127.0.0.0/8 in dotted-decimal form (four decimal
//     parts, no leading zeros: "127.0.0.1", "127.1.2.3");
//   - the IPv6 literal ::1 in any valid notation ("0:0::1"), with or without
//     a zone ("::1%lo"), and an IPv4-mapped loopback ("::ffff:127.0.0.1"), which
//     Go's net package dials and binds as 127.0.0.1; an IPv6 literal may come
//     in brackets ("[::1]").
//
// Not loopback: the empty host (which listens on every interface), the
// unspecified addresses, the shorthand and hexadecimal IPv4 forms some C
// resolvers accept ("127.1", "0x7f.1") and an IPv4 literal with a trailing
// dot ("127.0.0.1."), which are names to a resolver, and names that merely
// contain a loopback address ("127.0.0.1.nip.io", "localhost.example.com").
//
// The functions are pure and safe for concurrent use.
package loopback

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// Host reports whether host is loopback as the package doc defines it. host
// is a bare host, as url.URL.Hostname returns it, without a port.
func Host(host string) bool {
	if name, ok := strings.CutSuffix(host, "."); ok {
		return strings.EqualFold(name, "localhost")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if inner, ok := strings.CutPrefix(host, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		if !ok || !strings.Contains(inner, ":") {
			return false // brackets hold an IPv6 literal, nothing else
		}
		host = inner
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// HostPort reports whether a host:port address (a listen or dial address) is
// loopback: its host is (Host). An address without a port is an error; an
// empty host (":8080", every interface) is not loopback.
func HostPort(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	return Host(host), nil
}

// URL reports whether a URL's host is loopback (Host). A URL that does not
// parse or has no host (an Origin of "null") is not.
func URL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	return Host(u.Hostname())
}
