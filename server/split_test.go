package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/tlsconfig"
)

// splitFront serves cfg as agentd does, on a loopback listener within
// limits: Split over the HTTP server of Handler(cfg) and GRPCServer(cfg),
// over TLS with tlsCfg (h2c without). It returns the address, the listener,
// whose connection count the budgets keep, and the Split.
func splitFront(t *testing.T, cfg Config, limits ConnLimits, tlsCfg *tls.Config) (string, *LimitedListener, *Split) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := limits.Listener(ln, nil)
	srv := limits.Server(Handler(cfg), nil)
	srv.ErrorLog = log.New(io.Discard, "", 0)
	srv.TLSConfig = tlsCfg
	if tlsCfg == nil {
		srv.Protocols = PlainProtocols(ln.Addr())
	}
	s, err := NewSplit(ll, tlsCfg, srv, GRPCServer(cfg, limits), limits, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v, want http.ErrServerClosed", err)
		}
	})
	return ln.Addr().String(), ll, s
}

func engineConfig() Config {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	return Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})}
}

// TestSplitSortsByContentType: on one TLS listener, a gRPC client's
// connection goes to the gRPC server (the caller known by its SVID, as on
// JSON-RPC), an HTTP/2 client's JSON-RPC and HTTP+JSON requests to the
// HTTP/2 server, and an HTTP/1.1 client's to the HTTP/1.1 server.
func TestSplitSortsByContentType(t *testing.T) {
	f := newAuthFixture(t)
	svid := f.svid(t, peerID, tlsconfig.SVIDOptions{})
	g := f.grpcClient(t, a2agrpc.Options{TLS: f.grpcTLS(svid)})
	if _, err := g.SendMessage(context.Background(), hello("s1")); err != nil {
		t.Fatalf("SendMessage over gRPC: %v", err)
	}
	if c := f.split.Counts(); c.GRPC != 1 || c.HTTP2 != 0 || c.HTTP1 != 0 {
		t.Fatalf("after a gRPC call: %+v, want one gRPC connection", c)
	}

	h2 := f.client(svid)
	r, err := do(t, h2, f.url, sendBody, nil)
	if err != nil || r.status != 200 || r.rpc.Error != nil {
		t.Fatalf("JSON-RPC over HTTP/2: %v %+v", err, r)
	}
	res, err := h2.Get(strings.TrimSuffix(f.url, "/") + "/tasks/nope")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != http.StatusNotFound {
		t.Fatalf("HTTP+JSON GET /tasks/nope: HTTP/%d %d, want HTTP/2 404", res.ProtoMajor, res.StatusCode)
	}
	if c := f.split.Counts(); c.GRPC != 1 || c.HTTP2 != 1 || c.HTTP1 != 0 {
		t.Fatalf("after HTTP/2 requests: %+v, want one HTTP/2 connection", c)
	}

	cfg := tlsconfig.ClientConfig(svid, f.bundle, spiffetls.AuthorizeID(serverID))
	cfg.NextProtos = []string{"http/1.1"}
	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	r, err = do(t, h1, f.url, strings.Replace(sendBody, "m1", "m2", 1), nil)
	if err != nil || r.status != 200 || r.rpc.Error != nil {
		t.Fatalf("JSON-RPC over HTTP/1.1: %v %+v", err, r)
	}
	h1.CloseIdleConnections()
	if c := f.split.Counts(); c.GRPC != 1 || c.HTTP2 != 1 || c.HTTP1 != 1 || c.Dropped != 0 {
		t.Fatalf("after an HTTP/1.1 request: %+v, want one of each", c)
	}
}

// h2cTransport is an HTTP client transport speaking h2c only.
func h2cTransport() *http.Transport {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Transport{Protocols: p}
}

// countingDial returns a dialer that counts the connections it opened.
func countingDial(n *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			n.Add(1)
		}
		return c, err
	}
}

// TestSplitH2C: on a loopback plaintext listener, h2c connections are
// sorted as over TLS and HTTP/1.1 ones reach the HTTP server. An HTTP/2
// connection whose first request was not gRPC still serves a later gRPC
// call (the handler's own gRPC path). Every connection the clients opened
// is accounted for: net/http's transport may dial h2c again for a request
// and, finding its first connection free after all, close the new one
// unused (seen under load), which the split counts as dropped.
func TestSplitH2C(t *testing.T) {
	addr, _, s := splitFront(t, engineConfig(), ConnLimits{}, nil)
	var dials atomic.Int64
	dial := countingDial(&dials)
	g, err := a2agrpc.New(addr, a2agrpc.Options{Dial: func(ctx context.Context, a string) (net.Conn, error) { return dial(ctx, "tcp", a) }})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.SendMessage(context.Background(), hello("c1")); err != nil {
		t.Fatalf("SendMessage over h2c: %v", err)
	}
	tr := h2cTransport()
	tr.DialContext = dial
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	res, err := hc.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != 200 {
		t.Fatalf("GET /healthz over h2c: HTTP/%d %d", res.ProtoMajor, res.StatusCode)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/lf.a2a.v1.A2AService/SendMessage", bytes.NewReader(grpcFrame(sendRequest(t, "c2"))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	res, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if st := res.Trailer.Get("Grpc-Status"); st != "0" {
		t.Fatalf("gRPC call on an HTTP/2 connection opened by a GET: Grpc-Status %q (%q)", st, res.Header.Get("Grpc-Message"))
	}
	h1 := &http.Transport{DialContext: dial}
	defer h1.CloseIdleConnections()
	res, err = (&http.Client{Transport: h1, Timeout: 10 * time.Second}).Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 1 || res.StatusCode != 200 {
		t.Fatalf("GET /healthz over HTTP/1.1: HTTP/%d %d", res.ProtoMajor, res.StatusCode)
	}
	total := func(c SplitCounts) int64 { return c.GRPC + c.HTTP2 + c.HTTP1 + c.Dropped }
	if !testkit.Poll(5*time.Second, func() bool { return total(s.Counts()) == dials.Load() }) {
		t.Fatalf("counts %+v for %d connections opened", s.Counts(), dials.Load())
	}
	if c := s.Counts(); c.GRPC != 1 || c.HTTP2 != 1 || c.HTTP1 != 1 {
		t.Fatalf("counts %+v, want one of each (and %d unused dials dropped)", c, dials.Load()-3)
	}
}

// TestSplitStalledPreface: a client that stalls in its TLS handshake, or in
// the HTTP/2 preface before its first request (over TLS or h2c), holds a
// slot of the connection budget until the header timeout, then is dropped
// and its slot given back.
func TestSplitStalledPreface(t *testing.T) {
	f := newAuthFixture(t) // for the certificates
	for _, c := range []struct {
		name  string
		tls   bool
		start func(t *testing.T, conn net.Conn) net.Conn
	}{
		{"tcp silent", true, func(t *testing.T, conn net.Conn) net.Conn { return conn }},
		{"h2 no request", true, func(t *testing.T, conn net.Conn) net.Conn {
			tc := tls.Client(conn, f.h2ClientTLS(t))
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			if _, err := tc.Write([]byte(h2Preface)); err != nil { // then nothing
				t.Fatal(err)
			}
			return drainFrames(tc)
		}},
		{"h2c half preface", false, func(t *testing.T, conn net.Conn) net.Conn {
			if _, err := conn.Write([]byte(h2Preface[:10])); err != nil {
				t.Fatal(err)
			}
			return conn
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cfg *tls.Config
			if c.tls {
				cfg = tlsconfig.ServerConfig(f.src)
			}
			addr, ll, s := splitFront(t, engineConfig(), ConnLimits{HeaderTimeout: 100 * time.Millisecond, MaxConns: 1}, cfg)
			conn := c.start(t, dial(t, addr))
			defer conn.Close()
			if !testkit.Poll(5*time.Second, func() bool { return ll.Open() == 1 }) {
				t.Fatalf("the stalled connection is not counted: %d open", ll.Open())
			}
			// Over the cap while it stalls: the next connection is refused.
			other := dial(t, addr)
			defer other.Close()
			if !closedByPeer(other, 5*time.Second) {
				t.Fatal("a second connection was held while the stalled one used the only slot")
			}
			if !closedByPeer(conn, 5*time.Second) {
				t.Fatal("the stalled connection was not dropped")
			}
			if !testkit.Poll(5*time.Second, func() bool { return ll.Open() == 0 && s.Counts().Dropped == 1 }) {
				t.Fatalf("after the drop: %d open, %+v", ll.Open(), s.Counts())
			}
		})
	}
}

// TestSplitBadPreface: an HTTP/2 connection whose preface is wrong, whose
// frames before the first request exceed maxPeek, or whose first header
// block does not decode, is closed; the listener serves on.
func TestSplitBadPreface(t *testing.T) {
	f := newAuthFixture(t)
	frame := func(typ, flags byte, payload []byte) []byte {
		var h [9]byte
		h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
		h[3], h[4] = typ, flags
		binary.BigEndian.PutUint32(h[5:], 1)
		return append(h[:], payload...)
	}
	var settings []byte
	for len(settings) < maxPeek {
		settings = append(settings, 0, 0, 0, frameSettings, 0, 0, 0, 0, 0)
	}
	var hdrs bytes.Buffer
	hpack.NewEncoder(&hdrs).WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	for _, c := range []struct {
		name string
		send []byte
	}{
		{"not the preface", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"a frame over the bound", append([]byte(h2Preface), frame(0x0, 0, make([]byte, maxPeek))...)},
		{"many frames over the bound", append([]byte(h2Preface), settings...)},
		{"undecodable header block", append([]byte(h2Preface), frame(frameHeaders, flagEndHeaders, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})...)},
		{"continuation without headers", append([]byte(h2Preface), frame(frameContinuation, flagEndHeaders, hdrs.Bytes())...)},
		{"data inside a header block", append(append([]byte(h2Preface), frame(frameHeaders, 0, hdrs.Bytes())...), frame(0x0, 0, nil)...)},
		{"bad padding", append([]byte(h2Preface), frame(frameHeaders, flagEndHeaders|flagPadded, []byte{200, 1, 2})...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := f.split.Counts().Dropped
			tc := tls.Client(dial(t, strings.TrimSuffix(strings.TrimPrefix(f.url, "https://"), "/")), f.h2ClientTLS(t))
			defer tc.Close()
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			go func() { _, _ = tc.Write(c.send) }()
			if !closedByPeer(drainFrames(tc), 5*time.Second) {
				t.Fatal("the connection was not closed")
			}
			if !testkit.Poll(5*time.Second, func() bool { return f.split.Counts().Dropped == before+1 }) {
				t.Fatalf("not counted dropped: %+v", f.split.Counts())
			}
		})
	}
	// The listener still serves.
	g := f.grpcClient(t, a2agrpc.Options{TLS: f.grpcTLS(f.svid(t, peerID, tlsconfig.SVIDOptions{}))})
	if _, err := g.SendMessage(context.Background(), hello("after")); err != nil {
		t.Fatalf("SendMessage after the bad prefaces: %v", err)
	}
}

// h2ClientTLS is the TLS config of a client of f that asks for h2 only.
func (f *authFixture) h2ClientTLS(t *testing.T) *tls.Config {
	cfg := tlsconfig.ClientConfig(f.svid(t, peerID, tlsconfig.SVIDOptions{}), f.bundle, spiffetls.AuthorizeID(serverID))
	cfg.NextProtos = []string{"h2"}
	return cfg
}

// drainFrames is c with the server's SETTINGS frame (9 bytes, written before
// the preface is judged) read off, so closedByPeer sees the close.
func drainFrames(c net.Conn) net.Conn {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.ReadFull(c, make([]byte, 9))
	return c
}

// TestSplitBodyDeadline: over the split, a gRPC call whose request message
// trickles past the body deadline is cut (CANCELLED), and the connection
// serves a whole call after it.
func TestSplitBodyDeadline(t *testing.T) {
	addr, _, _ := splitFront(t, engineConfig(), ConnLimits{BodyTimeout: 50 * time.Millisecond}, nil)
	tr := h2cTransport()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write(grpcFrame(sendRequest(t, "trickle"))[:8]) }() // then nothing
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/lf.a2a.v1.A2AService/SendMessage", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	st := res.Header.Get("Grpc-Status")
	if st == "" {
		st = res.Trailer.Get("Grpc-Status")
	}
	if st != strconv.Itoa(int(codes.Canceled)) {
		t.Fatalf("a trickled message: Grpc-Status %q (%q), want CANCELLED", st, res.Header.Get("Grpc-Message"))
	}
	c, err := a2agrpc.New(addr, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if task, err := c.SendMessage(context.Background(), hello("whole")); err != nil || task == nil {
		t.Fatalf("SendMessage after the trickle: %v %v", task, err)
	}
}

// TestSplitShutdown: Shutdown lets a call under way finish and stops the
// listener; Serve returns http.ErrServerClosed.
func TestSplitShutdown(t *testing.T) {
	engine := tasks.NewEngine(tasks.NewMemoryStore(100, time.Hour), doneExec{}, nil)
	cfg := Config{Handler: engine, Card: a2abind.Card(a2abind.CardConfig{Name: "t", URL: "http://x/"})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limits := ConnLimits{}
	srv := limits.Server(Handler(cfg), nil)
	s, err := NewSplit(limits.Listener(ln, nil), nil, srv, GRPCServer(cfg, limits), limits, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	c, err := a2agrpc.New(ln.Addr().String(), a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.SendMessage(context.Background(), hello("before")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v, want http.ErrServerClosed", err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("the listener still accepts after Shutdown")
	}
}

// TestSplitNoPingPerCall: the gRPC server answers a unary call with its
// headers, message and trailers and no PING (grpc's bandwidth-delay probe,
// off with fixed windows), which would cost the client a round trip per
// call.
func TestSplitNoPingPerCall(t *testing.T) {
	addr, _, _ := splitFront(t, engineConfig(), ConnLimits{}, nil)
	conn := dial(t, addr)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(h2Preface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/lf.a2a.v1.A2AService/SendMessage"}, {":authority", addr},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(1, true, grpcFrame(sendRequest(t, "p1"))); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("before the call's trailers: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			t.Fatal("the server sent a PING during a unary call")
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				return // the trailers
			}
		}
	}
}

// TestAckFilter: the filter passes every frame on, byte for byte, but the
// first empty SETTINGS ACK, however the reads are cut.
func TestAckFilter(t *testing.T) {
	data := []byte{0, 0, 3, 0x0, 0, 0, 0, 0, 1, 'a', 'b', 'c'}
	ack := []byte{0, 0, 0, frameSettings, flagAck, 0, 0, 0, 0}
	ping := []byte{0, 0, 8, 0x6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	in := bytes.Join([][]byte{data, ack, ping, ack}, nil)
	want := bytes.Join([][]byte{data, ping, ack}, nil)
	for _, size := range []int{1, 2, 5, 9, 64} {
		var got []byte
		f := &ackFilter{r: iotest.OneByteReader(bytes.NewReader(in))}
		buf := make([]byte, size)
		for {
			n, err := f.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("reads of %d: got %v, want %v", size, got, want)
		}
	}
}

// goroutineHandler records the goroutine each send runs on.
type goroutineHandler struct {
	a2asrv.RequestHandler
	mu  sync.Mutex
	ids map[string]int
}

func (h *goroutineHandler) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	h.mu.Lock()
	h.ids[id]++
	h.mu.Unlock()
	return h.RequestHandler.OnSendMessage(ctx, p)
}

// TestSplitUnaryOnWorkers: the split's gRPC server runs one call after
// another on long-lived goroutines (grpc's stream workers), not each on a
// new goroutine, whose stack grows by copying through the call.
func TestSplitUnaryOnWorkers(t *testing.T) {
	cfg := engineConfig()
	h := &goroutineHandler{RequestHandler: cfg.Handler, ids: map[string]int{}}
	cfg.Handler = h
	addr, _, _ := splitFront(t, cfg, ConnLimits{}, nil)
	g, err := a2agrpc.New(addr, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	const calls = 20
	for i := range calls {
		if _, err := g.SendMessage(context.Background(), hello(fmt.Sprintf("w%d", i))); err != nil {
			t.Fatalf("SendMessage %d: %v", i, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.ids); n > runtime.GOMAXPROCS(0)+2 {
		t.Fatalf("%d sequential calls ran on %d goroutines, want at most %d (the workers)", calls, n, runtime.GOMAXPROCS(0)+2)
	}
}
