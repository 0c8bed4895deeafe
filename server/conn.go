package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of ConnLimits.
const (
	DefaultMaxConns        = 1024
	DefaultMaxConnsPerAddr = 128
	DefaultHeaderTimeout   = 10 * time.Second
	DefaultBodyTimeout     = 60 * time.Second
	DefaultIdleTimeout     = 60 * time.Second
)

// ConnLimits are the connection budgets of one listener (the service's, the
// probes', the metrics'): how many connections it holds, from one client
// address and in all, and how long a connection may take to send its
// request's headers and body, or sit idle between requests. A connection
// over a cap is closed as soon as it is accepted (the client sees the
// connection close before any answer, and may retry); it never waits in the
// accept queue. A body not received within BodyTimeout is cut: the request
// is answered 408 if the handler was reading it, and the connection closed.
// The zero value of a field means its default; the zero ConnLimits is every
// default. Its methods are safe for concurrent use.
type ConnLimits struct {
	// MaxConns caps the listener's open connections; default
	// DefaultMaxConns.
	MaxConns int
	// MaxConnsPerAddr caps the open connections from one client IP address;
	// default DefaultMaxConnsPerAddr, negative for no per-address cap (behind
	// a proxy every connection comes from its address).
	MaxConnsPerAddr int
	// HeaderTimeout bounds the TLS handshake and the request's headers, from
	// the start of the request; default DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// BodyTimeout bounds the request's body, from the end of its headers;
	// default DefaultBodyTimeout. Once the body is read, the answer takes
	// as long as it takes (a blocking send, an event stream).
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that has had no request for
	// this long; default DefaultIdleTimeout.
	IdleTimeout time.Duration
}

func (l ConnLimits) withDefaults() ConnLimits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxConnsPerAddr == 0 {
		l.MaxConnsPerAddr = DefaultMaxConnsPerAddr
	}
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = DefaultHeaderTimeout
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = DefaultBodyTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	return l
}

// Validate reports a limit that makes no sense, naming it.
func (l ConnLimits) Validate() error {
	switch {
	case l.MaxConns < 0:
		return fmt.Errorf("max conns must not be negative (got %d)", l.MaxConns)
	case l.MaxConnsPerAddr > 0 && l.MaxConns > 0 && l.MaxConnsPerAddr > l.MaxConns:
		return fmt.Errorf("max conns per address (%d) is over max conns (%d)", l.MaxConnsPerAddr, l.MaxConns)
	case l.HeaderTimeout < 0 || l.BodyTimeout < 0 || l.IdleTimeout < 0:
		return errors.New("timeouts must not be negative")
	}
	return nil
}

// Server returns an http.Server for h within these limits: the header and
// idle timeouts, and the body deadline (set on every request that has a
// body; the JSON-RPC endpoint lifts it once the body is in). Each of its
// connections keeps what its client certificate makes of its caller
// (connAuth), so that Auth checks the certificate on a connection's first
// request only. log receives the server's own errors. Serve it on
// Listener(ln).
func (l ConnLimits) Server(h http.Handler, log *slog.Logger) *http.Server {
	l = l.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           bodyDeadline(l.BodyTimeout, h),
		ReadHeaderTimeout: l.HeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnContext:       func(ctx context.Context, _ net.Conn) context.Context { return withConnAuth(ctx) },
	}
}

// bodyDeadline sets the read deadline of a request that has a body to d from
// now. A request without one gets none: its connection's reads are the
// server's wait for the next request, which must not be cut short.
func bodyDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 { // a length, or -1: chunked
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}

// Listener returns ln with the connection caps: a connection over MaxConns,
// or over MaxConnsPerAddr from its client's IP address, is closed at once and
// counted (LimitedListener.Refused). log hears about refusals, at most once a
// second.
func (l ConnLimits) Listener(ln net.Listener, log *slog.Logger) *LimitedListener {
	l = l.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &LimitedListener{Listener: ln, max: l.MaxConns, perAddr: l.MaxConnsPerAddr, log: log, byAddr: make(map[string]int)}
}

// LimitedListener is a net.Listener that holds at most so many connections,
// in all and per client address; create it with ConnLimits.Listener. It is
// safe for concurrent use.
type LimitedListener struct {
	net.Listener
	max, perAddr int
	log          *slog.Logger
	refused      atomic.Int64

	mu      sync.Mutex // guards open, byAddr, logged
	open    int
	byAddr  map[string]int
	logged  time.Time // the last refusal logged
	skipped int       // refusals not logged since
}

// Accept returns the next connection within the caps; the ones over a cap
// are closed without being returned.
func (l *LimitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := hostOf(c.RemoteAddr())
		l.mu.Lock()
		reason := ""
		switch {
		case l.open >= l.max:
			reason = "max conns"
		case l.perAddr > 0 && l.byAddr[addr] >= l.perAddr:
			reason = "max conns per address"
		}
		if reason != "" {
			l.noteRefusalLocked(addr, reason)
			l.mu.Unlock()
			l.refused.Add(1)
			c.Close()
			continue
		}
		l.open++
		l.byAddr[addr]++
		l.mu.Unlock()
		return &limitedConn{Conn: c, l: l, addr: addr}, nil
	}
}

func (l *LimitedListener) noteRefusalLocked(addr, reason string) {
	now := time.Now()
	if now.Sub(l.logged) < time.Second {
		l.skipped++
		return
	}
	l.log.Warn("connection refused: over the listener's cap", "listen", l.Addr().String(), "remote", addr, "cap", reason,
		"max_conns", l.max, "max_conns_per_addr", l.perAddr, "open", l.open, "refused_unlogged", l.skipped)
	l.logged, l.skipped = now, 0
}

// Refused returns how many connections were closed for being over a cap.
func (l *LimitedListener) Refused() int64 { return l.refused.Load() }

// Open returns how many accepted connections are open.
func (l *LimitedListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

func (l *LimitedListener) release(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
		delete(l.byAddr, addr)
	}
}

// hostOf is a connection's client address without its port.
func hostOf(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitedConn gives its slot back when closed, once.
type limitedConn struct {
	net.Conn
	l    *LimitedListener
	addr string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}
