package server

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// TestGRPCRequestOfAllocs: the request a call over the split amounts to
// takes its remote address from the connection's AuthInfo, formatted once
// in the handshake, and the canonical keys of the metadata a call usually
// carries from a table; each was built again a call before (7 more
// allocations with this metadata).
func TestGRPCRequestOfAllocs(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	rc := &tlsReplayConn{replayConn: &replayConn{Conn: addrConn{Conn: server}}, tc: tls.Server(server, &tls.Config{})}
	_, info, err := splitCreds{}.ServerHandshake(rc)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := info.(*splitTLSInfo)
	if !ok || ti.remote != "192.0.2.7:4242" {
		t.Fatalf("handshake: %#v, want the remote address kept", info)
	}
	md := metadata.Pairs(":authority", "agentd.test", "content-type", "application/grpc", "user-agent", "grpc-go/1.75",
		"a2a-version", "1.0", "authorization", "Bearer x", "te", "trailers")
	ctx := peer.NewContext(metadata.NewIncomingContext(context.Background(), md),
		&peer.Peer{Addr: addrConn{}.RemoteAddr(), LocalAddr: addrConn{}.LocalAddr(), AuthInfo: info})
	r, conn := grpcRequestOf(ctx, "/lf.a2a.v1.A2AService/SendMessage")
	if conn != &ti.caller || r.RemoteAddr != "192.0.2.7:4242" || r.Host != "agentd.test" ||
		r.Header.Get("Authorization") != "Bearer x" || r.Header.Get("A2A-Version") != "1.0" {
		t.Fatalf("request: remote %q host %q header %v", r.RemoteAddr, r.Host, r.Header)
	}
	got := testing.AllocsPerRun(200, func() { grpcRequestOf(ctx, "/lf.a2a.v1.A2AService/SendMessage") })
	// The metadata's copy (a map, a slice a key), the header's map, its
	// URL, the request and the local address's context.
	if want := 13.0; got > want {
		t.Fatalf("grpcRequestOf: %v allocations, want at most %v", got, want)
	}
}

// addrConn is a connection with fixed addresses.
type addrConn struct{ net.Conn }

func (addrConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 4242}
}

func (addrConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8443}
}
