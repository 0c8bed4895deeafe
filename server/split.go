package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/telemetry"
)

// The listener split: the main listener's connections are sorted once, when
// they open, rather than per request. A TLS connection is handshaken (within
// ConnLimits.HeaderTimeout); one that negotiated h2, or a loopback plaintext
// one that opens with the HTTP/2 preface (h2c), has its frames read up to its
// first HEADERS, whose header block is decoded: a Content-Type of
// application/grpc sends the connection to the gRPC binding's grpc.Server on
// grpc's own transport (about half the CPU per call of net/http's HTTP/2
// server, figure 2 of docs/performance.md), any other to the http.Server's
// own HTTP/2 (as prior-knowledge HTTP/2, the TLS state put back into each
// request); either replays the bytes read. HTTP/1.1 connections go to the
// http.Server unread. Every connection was accepted from the listener given
// (the connection budgets), so each counts against them until it closes.

// maxPeek bounds the bytes of an HTTP/2 connection read before it is sorted:
// the client's preface, SETTINGS, WINDOW_UPDATEs and its first header block.
const maxPeek = 64 << 10

// h2Preface is the HTTP/2 client connection preface.
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HTTP/2 frame types and flags the split reads.
const (
	frameHeaders      = 0x1
	frameSettings     = 0x4
	frameContinuation = 0x9
	flagAck           = 0x1
	flagEndHeaders    = 0x4
	flagPadded        = 0x8
	flagPriority      = 0x20
)

// ErrBadPreface is why a connection that opened as HTTP/2 was dropped before
// it was sorted: a wrong preface, a frame out of place, or more than maxPeek
// bytes before the first HEADERS.
var ErrBadPreface = errors.New("server: bad HTTP/2 connection preface")

// Split serves the main listener: HTTP/1.1 and HTTP/2 requests by an
// http.Server, gRPC connections by a grpc.Server. Create it with NewSplit.
type Split struct {
	ln      net.Listener
	tls     *tls.Config // nil: plaintext (h2c only when ln is on loopback)
	h2c     bool
	timeout time.Duration
	srv     *http.Server
	gs      *grpc.Server
	log     *slog.Logger

	httpLn, grpcLn *chanListener
	closed         atomic.Bool
	wg             sync.WaitGroup // the sorting goroutines

	mu    sync.Mutex
	conns map[net.Conn]struct{} // the connections of wg's goroutines

	grpcN, h2N, http1N, droppedN atomic.Int64
}

// SplitCounts are how many connections a Split sorted where.
type SplitCounts struct {
	GRPC    int64 // to the gRPC server
	HTTP2   int64 // to the HTTP/2 server (TLS h2 or h2c)
	HTTP1   int64 // to the HTTP/1.1 server
	Dropped int64 // closed before they were sorted: a failed handshake, a bad or late preface
}

// Counts returns how many connections were sorted where so far.
func (s *Split) Counts() SplitCounts {
	return SplitCounts{GRPC: s.grpcN.Load(), HTTP2: s.h2N.Load(), HTTP1: s.http1N.Load(), Dropped: s.droppedN.Load()}
}

// NewSplit sorts the connections of ln (under limits' HeaderTimeout) between
// srv (HTTP/1.1 and HTTP/2; NewSplit sets its Protocols, and wraps its
// ConnContext and Handler to give sorted HTTP/2 requests their TLS state)
// and gs (gRPC; GRPCServer). With cfg nil the listener is plaintext: h2c is
// sorted only on a loopback address, elsewhere every connection is HTTP/1.1
// (PlainProtocols). Serve srv only through the Split.
func NewSplit(ln net.Listener, cfg *tls.Config, srv *http.Server, gs *grpc.Server, limits ConnLimits, log *slog.Logger) (*Split, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	limits = limits.withDefaults()
	s := &Split{ln: ln, tls: cfg, timeout: limits.HeaderTimeout, srv: srv, gs: gs, log: log,
		httpLn: newChanListener(ln.Addr()), grpcLn: newChanListener(ln.Addr()), conns: map[net.Conn]struct{}{}}
	if cfg == nil {
		s.h2c = PlainProtocols(ln.Addr()).UnencryptedHTTP2()
	}
	// An HTTP/2 connection that is not gRPC reaches srv with the bytes
	// sorting read replayed, as prior-knowledge HTTP/2 (net/http serves
	// HTTP/2 over TLS only on a *tls.Conn it handshakes itself): its TLS
	// state, carried in the connection's context, is put back into each
	// request's TLS. Only sorted connections reach srv that way: over TLS
	// every other is a *tls.Conn, and a plaintext listener off loopback
	// does not speak h2c at all.
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(cfg != nil || s.h2c)
	srv.Protocols = p
	baseCtx, h := srv.ConnContext, srv.Handler
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if baseCtx != nil {
			ctx = baseCtx(ctx, c)
		}
		if t, ok := c.(*tlsReplayConn); ok {
			st := t.tc.ConnectionState()
			ctx = context.WithValue(ctx, tlsStateKey{}, &st)
		}
		return ctx
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			if st, ok := r.Context().Value(tlsStateKey{}).(*tls.ConnectionState); ok {
				r.TLS = st
			}
		}
		h.ServeHTTP(w, r)
	})
	return s, nil
}

// tlsStateKey carries the TLS state of a sorted HTTP/2 connection.
type tlsStateKey struct{}

// Serve accepts and sorts connections until Close or Shutdown, and returns
// http.ErrServerClosed then.
func (s *Split) Serve() error {
	errs := make(chan error, 2)
	go func() { errs <- s.srv.Serve(s.httpLn) }()
	go func() { errs <- s.gs.Serve(s.grpcLn) }()
	var err error
	var backoff time.Duration
	for {
		var c net.Conn
		c, err = s.ln.Accept()
		if err != nil {
			if s.closed.Load() || errors.Is(err, net.ErrClosed) {
				break
			}
			// Out of file descriptors, say: wait, as http.Server does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", "err", err, "retry_in", backoff.String())
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.wg.Add(1)
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			dst, conn := s.sort(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			if dst != nil {
				dst.put(conn)
			}
		}()
	}
	s.wg.Wait()
	s.httpLn.Close()
	s.grpcLn.Close()
	<-errs
	<-errs
	if s.closed.Load() {
		return http.ErrServerClosed
	}
	return fmt.Errorf("accept: %w", err)
}

// Addr is the listener's address.
func (s *Split) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting, lets the calls under way finish (GOAWAY to
// HTTP/2 and gRPC clients) until ctx ends, then closes what is left.
func (s *Split) Shutdown(ctx context.Context) error {
	s.closed.Store(true)
	s.ln.Close()
	s.closeConns() // not yet sorted: no request of theirs was read
	done := make(chan struct{})
	go func() { s.gs.GracefulStop(); s.wg.Wait(); close(done) }()
	err := s.srv.Shutdown(ctx)
	select {
	case <-done:
	case <-ctx.Done():
		s.gs.Stop()
		s.closeConns()
		<-done
	}
	return err
}

// Close closes the listener and every connection at once.
func (s *Split) Close() error {
	s.closed.Store(true)
	err := s.ln.Close()
	s.gs.Stop()
	s.srv.Close()
	s.closeConns()
	return err
}

// closeConns closes the connections being sorted.
func (s *Split) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// sort returns the listener of c's server and the connection to give it
// (c itself, its TLS connection, or either with the bytes read replayed),
// or closes c and returns nil.
func (s *Split) sort(c net.Conn) (*chanListener, net.Conn) {
	_ = c.SetDeadline(time.Now().Add(s.timeout))
	if s.tls != nil {
		tc := tls.Server(c, s.tls)
		if err := tc.Handshake(); err != nil {
			s.log.Debug("connection dropped: TLS handshake", "remote", c.RemoteAddr().String(), "err", err)
			s.droppedN.Add(1)
			tc.Close()
			return nil, nil
		}
		if tc.ConnectionState().NegotiatedProtocol != "h2" {
			_ = c.SetDeadline(time.Time{})
			s.http1N.Add(1)
			return s.httpLn, tc
		}
		return s.sortH2(tc, tc)
	}
	if !s.h2c {
		_ = c.SetDeadline(time.Time{})
		s.http1N.Add(1)
		return s.httpLn, c
	}
	// A plaintext connection is h2c when its first bytes are the preface.
	buf := make([]byte, 0, len(h2Preface))
	for len(buf) < len(h2Preface) {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if !strings.HasPrefix(h2Preface, string(buf)) {
			break
		}
		if err != nil {
			s.log.Debug("connection dropped: preface", "remote", c.RemoteAddr().String(), "err", err)
			s.droppedN.Add(1)
			c.Close()
			return nil, nil
		}
	}
	rc := &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(buf), c)}
	if string(buf) != h2Preface {
		_ = c.SetDeadline(time.Time{})
		s.http1N.Add(1)
		return s.httpLn, rc
	}
	return s.sortH2(c, nil)
}

// sortH2 reads the HTTP/2 connection c up to its first HEADERS and hands it
// to the gRPC server or the HTTP one, as sort does. c's preface is yet to be
// read unless tc is nil (h2c, whose preface sort read).
func (s *Split) sortH2(c net.Conn, tc *tls.Conn) (*chanListener, net.Conn) {
	grpcConn, replay, acked, err := peekH2(c, tc != nil)
	if err != nil {
		s.log.Debug("connection dropped: HTTP/2 preface", "remote", c.RemoteAddr().String(), "err", err)
		s.droppedN.Add(1)
		c.Close()
		return nil, nil
	}
	_ = c.SetDeadline(time.Time{})
	rc := &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(replay), &ackFilter{r: c, done: acked})}
	var conn net.Conn = rc
	if tc != nil {
		conn = &tlsReplayConn{replayConn: rc, tc: tc}
	}
	if grpcConn {
		s.grpcN.Add(1)
		return s.grpcLn, conn
	}
	s.h2N.Add(1)
	return s.httpLn, conn
}

// peekH2 writes an empty server SETTINGS (a gRPC client sends nothing more
// until the server's preface arrives), then reads c's frames up to its first
// header block, and reports whether the block's content-type is gRPC's. It
// returns what it read, to be replayed, less the client's SETTINGS ACK of the
// frame it wrote (the server c goes to expects only its own acked).
func peekH2(c net.Conn, withPreface bool) (isGRPC bool, replay []byte, acked bool, err error) {
	var buf []byte
	if withPreface {
		buf = make([]byte, len(h2Preface))
		if _, err := io.ReadFull(c, buf); err != nil {
			return false, nil, false, fmt.Errorf("read the preface: %w", err)
		}
		if string(buf) != h2Preface {
			return false, nil, false, fmt.Errorf("%w: %q", ErrBadPreface, buf)
		}
	} else {
		buf = []byte(h2Preface)
	}
	if _, err := c.Write([]byte{0, 0, 0, frameSettings, 0, 0, 0, 0, 0}); err != nil {
		return false, nil, false, fmt.Errorf("write the server preface: %w", err)
	}
	var block []byte
	inHeaders := false
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return false, nil, false, fmt.Errorf("read a frame: %w", err)
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := hdr[3], hdr[4]
		if len(buf)+9+n > maxPeek {
			return false, nil, false, fmt.Errorf("%w: over %d bytes before the first request", ErrBadPreface, maxPeek)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(c, payload); err != nil {
			return false, nil, false, fmt.Errorf("read a frame: %w", err)
		}
		if typ == frameSettings && flags&flagAck != 0 && n == 0 && !inHeaders && !acked {
			acked = true
			continue // the ack of the frame written above: not replayed
		}
		buf = append(append(buf, hdr[:]...), payload...)
		switch {
		case inHeaders && typ != frameContinuation:
			return false, nil, false, fmt.Errorf("%w: frame type %d inside a header block", ErrBadPreface, typ)
		case typ == frameHeaders:
			p := payload
			if flags&flagPadded != 0 {
				if len(p) < 1 || int(p[0]) > len(p)-1 {
					return false, nil, false, fmt.Errorf("%w: bad padding", ErrBadPreface)
				}
				p = p[1 : len(p)-int(p[0])]
			}
			if flags&flagPriority != 0 {
				if len(p) < 5 {
					return false, nil, false, fmt.Errorf("%w: short HEADERS", ErrBadPreface)
				}
				p = p[5:]
			}
			block, inHeaders = p, true
		case typ == frameContinuation:
			if !inHeaders {
				return false, nil, false, fmt.Errorf("%w: CONTINUATION outside a header block", ErrBadPreface)
			}
			block = append(block, payload...)
		}
		if inHeaders && flags&flagEndHeaders != 0 {
			break
		}
	}
	var ct string
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == "content-type" {
			ct = f.Value
		}
	})
	dec.SetMaxStringLength(maxPeek)
	if _, err := dec.Write(block); err != nil {
		return false, nil, false, fmt.Errorf("%w: header block: %w", ErrBadPreface, err)
	}
	if err := dec.Close(); err != nil {
		return false, nil, false, fmt.Errorf("%w: header block: %w", ErrBadPreface, err)
	}
	return ct == GRPCContentType || strings.HasPrefix(ct, GRPCContentType+"+") || strings.HasPrefix(ct, GRPCContentType+";"), buf, acked, nil
}

// replayConn reads r (the bytes read while sorting, then the connection).
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// tlsReplayConn is a replayConn over TLS, tc (whose state the gRPC
// credentials give as the peer's TLSInfo, and the HTTP server as each
// request's TLS). It has no ConnectionState method: net/http would then
// serve it as HTTP/1.1 only.
type tlsReplayConn struct {
	*replayConn
	tc *tls.Conn
}

// ackFilter passes a connection's HTTP/2 frames on, less the first empty
// SETTINGS ACK (the ack of the SETTINGS peekH2 wrote), unless done says it
// was dropped already.
type ackFilter struct {
	r    io.Reader
	done bool
	hdr  [9]byte
	pend []byte // of hdr, still to pass on
	left int    // payload bytes of the current frame to pass on
}

func (f *ackFilter) Read(p []byte) (int, error) {
	if len(f.pend) > 0 {
		n := copy(p, f.pend)
		f.pend = f.pend[n:]
		return n, nil
	}
	if f.done {
		return f.r.Read(p)
	}
	if f.left > 0 {
		if len(p) > f.left {
			p = p[:f.left]
		}
		n, err := f.r.Read(p)
		f.left -= n
		return n, err
	}
	if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
		return 0, err
	}
	n := int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
	if f.hdr[3] == frameSettings && f.hdr[4]&flagAck != 0 && n == 0 {
		f.done = true // dropped; the rest passes through
		return f.r.Read(p)
	}
	f.left = n
	f.pend = f.hdr[:]
	return f.Read(p)
}

// chanListener is a net.Listener of the connections put to it.
type chanListener struct {
	addr   net.Addr
	conns  chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// put hands c to Accept, or closes it when the listener is closed.
func (l *chanListener) put(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// splitCreds are the transport credentials of the gRPC server behind the
// split: the connection is already handshaken (or is h2c on loopback), so
// the handshake only reports its TLS state as the peer's TLSInfo.
type splitCreds struct{}

func (splitCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("server: the split's credentials are a server's")
}

func (splitCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if t, ok := c.(*tlsReplayConn); ok {
		info := &splitTLSInfo{TLSInfo: credentials.TLSInfo{State: t.tc.ConnectionState(), CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}}
		if a := c.RemoteAddr(); a != nil {
			info.remote = a.String()
		}
		return c, info, nil
	}
	return c, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

func (splitCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}
func (c splitCreds) Clone() credentials.TransportCredentials { return c }
func (splitCreds) OverrideServerName(string) error           { return nil }

// splitTLSInfo is the AuthInfo of a TLS connection behind the split: its
// TLS state, which each call's request points at rather than copies, and
// what its client certificate makes of the caller, found on its first call
// and kept for the rest (connIdentity).
type splitTLSInfo struct {
	credentials.TLSInfo
	caller connIdentity
	remote string // the connection's remote address, formatted once
}

// plainInfo is the AuthInfo of an h2c connection.
type plainInfo struct{ credentials.CommonAuthInfo }

func (plainInfo) AuthType() string { return "insecure" }

// GRPCServer returns the gRPC binding's server for Split: the binding's
// service and codec, a message over BodyLimit(cfg.MaxMessage) refused, and
// the front's admission, in interceptors: the caller authenticated and
// authorized by cfg.Auth exactly as on POST / (from the connection's TLS
// state and the authorization metadata), a non-loopback Origin refused, each
// call a span and counted in cfg.Metrics as on the other bindings. limits
// give the connection's handshake timeout, its idle timeout, and the body
// deadline: a call whose request message has not arrived within BodyTimeout
// is cancelled.
func GRPCServer(cfg Config, limits ConnLimits) *grpc.Server {
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = api.DefaultMaxMessage
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	auth := cfg.Auth
	if auth == nil {
		auth = &Auth{Open: true, Log: cfg.Log}
	}
	limits = limits.withDefaults()
	f := &grpcGate{auth: auth, metrics: cfg.Metrics, log: cfg.Log, bodyTimeout: limits.BodyTimeout}
	return newGRPC(cfg.Handler, cfg.MaxMessage, f, cfg.ReserveMessage,
		grpc.Creds(splitCreds{}),
		grpc.ConnectionTimeout(limits.HeaderTimeout),
		// net/http's HTTP/2 defaults, which the other bindings get: 250
		// streams, 1 MiB of headers, 1 MiB flow-control windows. A fixed
		// window also turns off grpc's bandwidth-delay probe, a PING (and
		// its ack, a round trip) after the data of about every call.
		grpc.MaxConcurrentStreams(250),
		grpc.MaxHeaderListSize(http.DefaultMaxHeaderBytes),
		grpc.InitialWindowSize(1<<20),
		grpc.InitialConnWindowSize(1<<20),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: limits.IdleTimeout}),
		// A call runs on one of GOMAXPROCS long-lived goroutines (a new
		// one when they are all busy) rather than on a new goroutine,
		// whose stack grew by copying through every call (about a tenth
		// of the handler's CPU, BenchmarkFrontSend's profile).
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
		grpc.InTapHandle(f.tap))
}

// grpcGate is the admission of the gRPC server's calls.
type grpcGate struct {
	auth        *Auth
	metrics     *telemetry.Metrics
	log         *slog.Logger
	bodyTimeout time.Duration
}

// bodyTimerKey carries a call's body timer from tap to the interceptors.
type bodyTimerKey struct{}

// tap starts the call's body deadline: unless the interceptors stop it once
// the request message is in, it cancels the call.
func (f *grpcGate) tap(ctx context.Context, _ *tap.Info) (context.Context, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := time.AfterFunc(f.bodyTimeout, cancel)
	return context.WithValue(ctx, bodyTimerKey{}, t), nil
}

func stopBodyTimer(ctx context.Context) {
	if t, ok := ctx.Value(bodyTimerKey{}).(*time.Timer); ok {
		t.Stop()
	}
}

// unary admits a unary call, then runs it through the binding's
// interceptor (grpcUnary).
func (f *grpcGate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (res any, err error) {
	stopBodyTimer(ctx)         // the message is in
	defer dropReservation(req) // a caller refused never reaches grpcUnary, which takes it
	err = f.serve(ctx, info.FullMethod, func(ctx context.Context) error {
		res, err = grpcUnary(ctx, req, info, handler)
		return err
	})
	return res, err
}

func (f *grpcGate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return f.serve(ss.Context(), info.FullMethod, func(ctx context.Context) error {
		return handler(srv, &frontStream{ServerStream: ss, ctx: ctx})
	})
}

// frontStream is a server stream in the context of its admitted caller; its
// first message stops the body deadline.
type frontStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *frontStream) Context() context.Context { return s.ctx }

func (s *frontStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	stopBodyTimer(s.ctx)
	return err
}

// serve runs call as grpcHTTP runs a call over net/http: the request the
// call's metadata and connection make goes through telemetry.ServeA2A (a
// span, the metrics) and grpcAdmit (the caller authenticated and
// authorized), and call runs with the caller's identity and the code note.
func (f *grpcGate) serve(ctx context.Context, method string, call func(context.Context) error) error {
	var err error
	r, conn := grpcRequestOf(ctx, method)
	telemetry.ServeA2A(f.metrics, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		telemetry.NoteRPCMethod(w, grpcMethod(method))
		id, st := grpcAdmit(f.auth, r, conn, f.log)
		if st != nil {
			err = st.Err()
			return
		}
		var code atomic.Int64
		code.Store(-1)
		err = call(context.WithValue(WithIdentity(r.Context(), id, r.Header), grpcCodeKey{}, &code))
		if c := code.Load(); c >= 0 {
			telemetry.NoteRPCCode(w, int(c))
		}
	})).ServeHTTP(discardWriter{}, r)
	return err
}

// grpcRequestOf is the HTTP request a gRPC call over the split amounts to,
// for the front's authentication and telemetry: its metadata as headers,
// the connection's TLS state, addresses and authority; and, for a TLS
// connection, what its certificate makes of the caller, kept per connection.
func grpcRequestOf(ctx context.Context, method string) (r *http.Request, conn *connIdentity) {
	md, _ := metadata.FromIncomingContext(ctx) // a copy: its values are the header's
	h := make(http.Header, len(md))
	host := ""
	for k, vs := range md {
		if k == ":authority" && len(vs) > 0 {
			host = vs[0]
		}
		if strings.HasPrefix(k, ":") {
			continue
		}
		h[headerKey(k)] = vs
	}
	req := http.Request{Method: http.MethodPost, Proto: "HTTP/2.0", ProtoMajor: 2, Header: h, Host: host,
		URL: &url.URL{Path: method}, RequestURI: method}
	if p, ok := peer.FromContext(ctx); ok {
		switch ti := p.AuthInfo.(type) {
		case *splitTLSInfo:
			req.TLS, conn, req.RemoteAddr = &ti.State, &ti.caller, ti.remote
		case credentials.TLSInfo:
			req.TLS = &ti.State
		}
		if req.RemoteAddr == "" && p.Addr != nil {
			req.RemoteAddr = p.Addr.String()
		}
		if p.LocalAddr != nil {
			ctx = context.WithValue(ctx, http.LocalAddrContextKey, p.LocalAddr)
		}
	}
	return req.WithContext(ctx), conn
}

// headerKeys are the canonical header keys of the metadata keys a call
// usually carries, so that grpcRequestOf does not build them again a call.
var headerKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"authorization", "a2a-version", "a2a-extensions", "content-type", "user-agent", "te",
		"grpc-accept-encoding", "origin", "sec-fetch-site", "traceparent", "tracestate", "baggage"} {
		m[k] = http.CanonicalHeaderKey(k)
	}
	return m
}()

// headerKey is the canonical HTTP header key of the metadata key k.
func headerKey(k string) string {
	if c, ok := headerKeys[k]; ok {
		return c
	}
	return http.CanonicalHeaderKey(k)
}

// discardWriter is the ResponseWriter of grpcGate.serve's request: the
// answer goes over gRPC.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}
