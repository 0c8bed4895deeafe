package a2a

import (
	"fmt"
	"strings"
	"time"
)

// ParsePeerSpec parses a peer as the --peer flag writes it:
//
//	NAME=URL[,spiffe=SPIFFE_ID][,token-file=PATH][,timeout=DURATION]
//
// and validates it (PeerConfig.Validate).
func ParsePeerSpec(s string) (PeerConfig, error) {
	fields := strings.Split(s, ",")
	name, rawURL, ok := strings.Cut(fields[0], "=")
	if !ok {
		return PeerConfig{}, fmt.Errorf("peer %q: want NAME=URL[,spiffe=ID][,token-file=PATH][,timeout=DURATION]", s)
	}
	c := PeerConfig{Name: strings.TrimSpace(name), URL: strings.TrimSpace(rawURL)}
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || v == "" {
			return PeerConfig{}, fmt.Errorf("peer %s: option %q: want KEY=VALUE", c.Name, f)
		}
		if seen[k] {
			return PeerConfig{}, fmt.Errorf("peer %s: option %s given twice", c.Name, k)
		}
		seen[k] = true
		switch k {
		case "spiffe":
			if !strings.HasPrefix(v, "spiffe://") {
				return PeerConfig{}, fmt.Errorf("peer %s: spiffe=%q: want spiffe://TRUST_DOMAIN/PATH", c.Name, v)
			}
			c.SPIFFEID = v
		case "token-file":
			c.BearerTokenFile = v
		case "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return PeerConfig{}, fmt.Errorf("peer %s: timeout=%q: want a positive duration", c.Name, v)
			}
			c.Timeout = d
		default:
			return PeerConfig{}, fmt.Errorf("peer %s: unknown option %q (want spiffe, token-file or timeout)", c.Name, k)
		}
	}
	if err := c.Validate(); err != nil {
		return PeerConfig{}, err
	}
	return c, nil
}
