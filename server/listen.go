package server

import (
	"fmt"
	"net"
	"net/netip"
)

// IsLoopback reports whether a listen address (host:port) binds only loopback
// interfaces: 127.0.0.0/8, ::1 or "localhost". An empty host (all interfaces) is
// not loopback.
func IsLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false, nil // a host name other than localhost may resolve anywhere
	}
	return ip.IsLoopback(), nil
}
