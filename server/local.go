package server

import (
	"net"
	"net/http"
	"strings"

	"github.com/agentd/agentd/internal/loopback"
)

// The operator role and the browser (docs/security.md, "The local operator"
// and "Operators in a browser").
//
// In the development mode (plain http on loopback, no tokens file: Auth.Open)
// nobody authenticates, so nobody would be an operator and neither `agentd
// ctl` nor the console could be tried locally. localOperator picks out the
// local user instead: a request counts as the operator when
//
//   - its peer address is loopback (the connection comes from this machine);
//   - its Host header is a loopback name or address with the port of the
//     listener the request arrived on, so a page of another site whose name
//     was rebound to 127.0.0.1 (DNS rebinding), which sends its own name as
//     Host, is not;
//   - it carries no cross-site signal (crossSite): no Origin but the
//     server's own, and a Sec-Fetch-Site of same-origin or none if any, so a
//     page of another origin on this machine (another port is another
//     origin) cannot drive the operator methods through the user's browser.
//
// Everyone else stays the anonymous peer of the development mode. An
// operator that authenticated (mTLS, a JWT-SVID, a static token) keeps the
// role only without a cross-site signal too: a browser that holds an
// operator's client certificate presents it to every page's requests.

// crossSite reports whether r carries a sign that a page of another origin
// sent it: an Origin header other than the server's own (ownOrigin; "null"
// included), or a Sec-Fetch-Site header other than same-origin and none
// (same-site is another origin on the same site, such as another port).
// Requests without either header (every non-browser client, and a browser's
// same-origin GET) carry none.
//
// One cross-site request carries no such sign: a top-level navigation to the
// console's page (a link to it followed from another site). It reads a static
// page that holds no data and changes nothing, the page cannot be framed, and
// everything the page then asks for is same-origin.
func crossSite(r *http.Request) bool {
	if navigatesToConsole(r) {
		return false
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return true
	}
	if o := r.Header.Get("Origin"); o != "" && !strings.EqualFold(o, ownOrigin(r)) {
		return true
	}
	return false
}

// navigatesToConsole reports whether r is a browser's top-level navigation
// (GET or HEAD of a document, Sec-Fetch-Mode navigate) to the console's page.
func navigatesToConsole(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == ConsolePath &&
		r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document" &&
		r.Header.Get("Origin") == ""
}

// ownOrigin is the origin the request was addressed to: its scheme and its
// Host header, as a browser writes an Origin.
func ownOrigin(r *http.Request) string {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return scheme + r.Host
}

// localOperator reports whether r is the local operator of the development
// mode: from a loopback peer, addressed by a loopback Host with the
// listener's own port, without a cross-site signal.
func localOperator(r *http.Request) bool {
	peer, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || !loopback.Host(peer) {
		return false
	}
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		// No port: the scheme's default one.
		host, port = r.Host, "80"
		if r.TLS != nil {
			port = "443"
		}
	}
	if !loopback.Host(host) {
		return false
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	_, localPort, err := net.SplitHostPort(local.String())
	if err != nil || localPort != port {
		return false
	}
	return !crossSite(r)
}
