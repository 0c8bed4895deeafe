package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2acall"
)

// maxCard bounds a peer's agent card: a bigger one is refused, not read.
const maxCard = 1 << 20

// maxCardTTL caps how long a card is trusted, whatever its Cache-Control
// says.
const maxCardTTL = 24 * time.Hour

// ErrNoInterface is the error of a card that offers no version and binding
// agentd calls (within the peer's pins).
var ErrNoInterface = errors.New("peer: the agent card offers no protocol version and binding agentd calls")

// Interface is one way a peer's card says it can be called.
type Interface struct {
	URL     string
	Binding string // as the card writes it, upper-cased: JSONRPC, HTTP+JSON, GRPC
	Version string // major.minor: 0.3, 1.0
}

// Key is the interface's version and binding.
func (i Interface) Key() a2acall.Key { return a2acall.Key{Version: i.Version, Binding: i.Binding} }

// peerCard is what agentd reads of a peer's agent card, in either shape.
type peerCard struct {
	// card holds what the rest of the provider reads: the name, the URL
	// and the capabilities (streaming, extensions).
	card *a2a.AgentCard
	// interfaces are in the card's order: 1.0's supportedInterfaces, then
	// 0.3's url (its preferredTransport) and additionalInterfaces.
	interfaces []Interface
}

// wireCard is both shapes of an agent card, as far as agentd reads them.
type wireCard struct {
	Name                 string `json:"name"`
	URL                  string `json:"url"`
	PreferredTransport   string `json:"preferredTransport"`
	ProtocolVersion      string `json:"protocolVersion"`
	AdditionalInterfaces []struct {
		URL       string `json:"url"`
		Transport string `json:"transport"`
	} `json:"additionalInterfaces"`
	SupportedInterfaces []struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"supportedInterfaces"`
	Capabilities a2a.AgentCapabilities `json:"capabilities"`
}

// parseCard reads an agent card in the A2A 0.3 shape (url, preferredTransport,
// additionalInterfaces, protocolVersion), the 1.0 shape (supportedInterfaces,
// each with its protocolBinding and protocolVersion) or both. A 0.3 card
// without a protocolVersion is 0.3, a 0.3 interface without a transport
// JSON-RPC (0.3's default), and a 1.0 interface without a protocolVersion
// 1.0. A card that is not a JSON object of these types, or lists no
// interface, is an error.
func parseCard(body []byte) (*peerCard, error) {
	var w wireCard
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("the agent card: %w", err)
	}
	pc := &peerCard{card: &a2a.AgentCard{Name: w.Name, URL: w.URL, Capabilities: w.Capabilities,
		PreferredTransport: a2a.TransportProtocol(w.PreferredTransport), ProtocolVersion: w.ProtocolVersion}}
	for _, in := range w.SupportedInterfaces {
		v := a2acall.MajorMinor(in.ProtocolVersion)
		if v == "" {
			v = a2acall.Version10
		}
		pc.interfaces = append(pc.interfaces, Interface{URL: in.URL, Binding: binding(in.ProtocolBinding), Version: v})
	}
	v03 := a2acall.MajorMinor(w.ProtocolVersion)
	if v03 == "" {
		v03 = a2acall.Version03
	}
	if w.URL != "" {
		pc.interfaces = append(pc.interfaces, Interface{URL: w.URL, Binding: binding(w.PreferredTransport), Version: v03})
	}
	for _, in := range w.AdditionalInterfaces {
		pc.interfaces = append(pc.interfaces, Interface{URL: in.URL, Binding: binding(in.Transport), Version: v03})
	}
	if len(pc.interfaces) == 0 {
		return nil, errors.New("the agent card lists no interface (neither url nor supportedInterfaces)")
	}
	return pc, nil
}

// binding is a card's binding name upper-cased; "" (0.3's default) is
// JSON-RPC.
func binding(s string) string {
	if s == "" {
		return a2acall.BindingJSONRPC
	}
	return strings.ToUpper(s)
}

// versionsByPreference are the protocol versions agentd calls, the one it
// prefers first.
var versionsByPreference = []string{a2acall.Version10, a2acall.Version03}

// choose returns the interface to call among a card's: the newest version
// agentd prefers that the card offers over a binding reg has, over the
// first such binding in the card's order. A non-empty version or binding
// pins it. When both are pinned and the card does not offer the pair, the
// pair is called anyway, at the configured URL (an interface without a
// URL): the operator's word stands over the card's, and a peer that does
// not speak it says so when called. No interface otherwise is
// ErrNoInterface, with what the card offers and what agentd would have
// called.
func choose(ifaces []Interface, reg a2acall.Registry, version, binding string) (Interface, error) {
	for _, v := range versionsByPreference {
		if version != "" && v != version {
			continue
		}
		for _, in := range ifaces {
			if in.Version == v && (binding == "" || in.Binding == binding) && reg[in.Key()] != nil {
				return in, nil
			}
		}
	}
	if pinned := (a2acall.Key{Version: version, Binding: binding}); reg[pinned] != nil {
		return Interface{Version: version, Binding: binding}, nil
	}
	var offered []string
	for _, in := range ifaces {
		if k := in.Key().String(); !slices.Contains(offered, k) {
			offered = append(offered, k)
		}
	}
	return Interface{}, fmt.Errorf("%w: it offers %s; agentd calls %s", ErrNoInterface, orNone(offered), orNone(calls(reg, version, binding)))
}

// calls lists, sorted, the transports of reg within the pins ("": any).
func calls(reg a2acall.Registry, version, binding string) []string {
	var out []string
	for k := range reg {
		if (version == "" || k.Version == version) && (binding == "" || k.Binding == binding) {
			out = append(out, k.String())
		}
	}
	slices.Sort(out)
	return out
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// cacheTTL is how long a card answered with these headers may be trusted:
// its Cache-Control max-age (no-store and no-cache: not at all), capped at
// maxCardTTL; def without one.
func cacheTTL(h http.Header, def time.Duration) time.Duration {
	cc := h.Values("Cache-Control")
	if len(cc) == 0 {
		return def
	}
	ttl := def
	for _, line := range cc {
		for _, d := range strings.Split(line, ",") {
			name, value, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-store", "no-cache":
				return 0
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(value), `"`), 10, 64)
				if err != nil || n < 0 {
					continue // an invalid max-age is ignored
				}
				ttl = time.Duration(min(n, int64(maxCardTTL/time.Second))) * time.Second
			}
		}
	}
	return ttl
}

// fetchCard reads the agent card under base (/.well-known/agent-card.json)
// and how long it may be trusted. It asks for the 1.0 card (A2A-Version:
// 1.0; a peer serving both shapes may answer each version its own); a 0.3
// peer ignores the header.
func fetchCard(ctx context.Context, hc *http.Client, base string) (*peerCard, time.Duration, error) {
	u, err := url.JoinPath(base, "/.well-known/agent-card.json")
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(a2acall.VersionHeader, a2acall.Version10)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("HTTP %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCard+1))
	if err != nil {
		return nil, 0, err
	}
	if len(body) > maxCard {
		return nil, 0, fmt.Errorf("the agent card is over %d bytes", maxCard)
	}
	pc, err := parseCard(body)
	if err != nil {
		return nil, 0, err
	}
	return pc, cacheTTL(resp.Header, cardTTL), nil
}
