package loopback

import "testing"

func TestHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1":          true,
		"127.1.2.3":          true,
		"127.255.255.254":    true,
		"::1":                true,
		"0:0::1":             true,
		"0:0:0:0:0:0:0:1":    true,
		"::1%lo":             true, // zone-scoped loopback
		"[::1]":              true,
		"[::1%lo]":           true,
		"::ffff:127.0.0.1":   true, // IPv4-mapped: dialed and bound as 127.0.0.1
		"[::ffff:127.0.0.1]": true,
		"::ffff:7f00:1":      true,
		"localhost":          true,
		"LOCALHOST":          true,
		"LocalHost":          true,
		"localhost.":         true,
		"LOCALHOST.":         true,

		"":                      false, // every interface, when listening
		"localhost..":           false,
		".localhost":            false,
		"foo.localhost":         false, // names other than localhost are not resolved
		"localhost.example.com": false,
		"127.0.0.1.nip.io":      false,
		"127.0.0.1.":            false, // a name to a resolver, not a literal
		"127.1":                 false, // shorthand IPv4, which only some resolvers read as 127.0.0.1
		"0x7f.1":                false,
		"0x7f000001":            false,
		"2130706433":            false,
		"127.000.000.001":       false,
		"127.0.0.1%lo":          false,
		"[127.0.0.1]":           false, // brackets hold IPv6 only
		"[::1":                  false,
		"::1]":                  false,
		"[::1]:8080":            false, // a host:port is not a host (HostPort reads it)
		"127.0.0.1:80":          false,
		"::":                    false,
		"0.0.0.0":               false,
		"::ffff:0.0.0.0":        false,
		"10.0.0.1":              false,
		"::2":                   false,
		"fe80::1%lo":            false,
		"example.org":           false,
	} {
		if got := Host(host); got != want {
			t.Errorf("Host(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestHostPort(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "[::1%lo]:1": true, "localhost:1": true, "LOCALHOST:1": true,
		"[::ffff:127.0.0.1]:80": true, "127.1.2.3:9": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "example.org:80": false, "127.1:80": false,
		"[::]:80": false,
	} {
		got, err := HostPort(addr)
		if err != nil || got != want {
			t.Errorf("HostPort(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	for _, bad := range []string{"", "nonsense", "127.0.0.1", "::1"} {
		if _, err := HostPort(bad); err == nil {
			t.Errorf("HostPort(%q): no error for an address without a port", bad)
		}
	}
}

func TestURL(t *testing.T) {
	for raw, want := range map[string]bool{
		"http://127.0.0.1:8080": true, "http://[::1]:8080/x": true, "http://[::1%25lo]:1": true, "http://LOCALHOST": true,
		"http://localhost.:3000": true, "https://[::ffff:127.0.0.1]/": true,
		"null": false, "": false, "http://": false, "http://127.1": false, "http://0x7f.1": false,
		"http://127.0.0.1.nip.io": false, "http://localhost.example.com": false, "http://example.org": false,
		"127.0.0.1": false, "http://[::1": false,
	} {
		if got := URL(raw); got != want {
			t.Errorf("URL(%q) = %v, want %v", raw, got, want)
		}
	}
}
