package a2acall

import "net/http"

// Protocol versions as agent cards name them (major.minor; a card's "0.3.0"
// is "0.3", see MajorMinor).
const (
	Version03 = "0.3"
	Version10 = "1.0"
)

// Binding names as agent cards write them (0.3's transport, 1.0's
// protocolBinding).
const (
	BindingJSONRPC  = "JSONRPC"
	BindingHTTPJSON = "HTTP+JSON"
	BindingGRPC     = "GRPC"
)

// Key names a transport: a protocol version over a binding.
type Key struct {
	Version string // Version03 or Version10
	Binding string // BindingJSONRPC, ...
}

// String is "1.0/JSONRPC".
func (k Key) String() string { return k.Version + "/" + k.Binding }

// NewTransport builds the transport of one agent interface: its url, the
// peer's shared http.Client and the caller's options. A transport that holds
// connections of its own (gRPC's) implements io.Closer, and its owner closes
// it when done with it; an interface it cannot call (a malformed URL, say)
// is an error.
type NewTransport func(url string, hc *http.Client, opts Options) (Transport, error)

// Registry is the transports agentd can call, by version and binding. It is
// a plain map: build it once, then only read it (reads are safe for
// concurrent use).
type Registry map[Key]NewTransport

// JSONRPC returns a registry of the JSON-RPC transports of both versions:
// Client (0.3) and ClientV1 (1.0).
func JSONRPC() Registry {
	return Registry{
		{Version03, BindingJSONRPC}: func(url string, hc *http.Client, opts Options) (Transport, error) { return New(url, hc, opts), nil },
		{Version10, BindingJSONRPC}: func(url string, hc *http.Client, opts Options) (Transport, error) { return NewV1(url, hc, opts), nil },
	}
}

// MajorMinor returns the major.minor of a protocol version ("0.3.0" is
// "0.3", "1.0" is "1.0"); a version without a dot is returned as it is.
func MajorMinor(v string) string {
	first := -1
	for i := 0; i < len(v); i++ {
		if v[i] == '.' {
			if first >= 0 {
				return v[:i]
			}
			first = i
		}
	}
	return v
}
