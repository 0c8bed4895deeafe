package mcp

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/bearer"
	"github.com/agentd/agentd/supervisor"
)

// Options tune a Set. The zero value of a field means its default.
type Options struct {
	// Logger receives connects, losses and reconnects; default discards.
	Logger *slog.Logger
	// ConnectTimeout bounds one connect attempt (initialize and the whole tool
	// list) and one health ping; default 10s.
	ConnectTimeout time.Duration
	// CallWait is how long a tool call waits for a session that is being
	// (re)connected before it fails as a tool error; default 5s.
	CallWait time.Duration
	// MaxResult caps the bytes of a result's text, and separately of its
	// structured content, that reach the subagent; default 64 KiB.
	MaxResult int
	// ReconnectMin and ReconnectMax bound the backoff between failed connects:
	// it doubles from ReconnectMin, with jitter, up to ReconnectMax; defaults
	// 500ms and 30s. A session lost after it had lasted ReconnectMax is
	// retried at once; a younger one backs off like a failed connect.
	ReconnectMin, ReconnectMax time.Duration
	// PingInterval is how often a connected session is pinged; a failed ping
	// reconnects. Default 15s; negative disables pings.
	PingInterval time.Duration
	// HTTPClient is the base client; default one with dial and TLS handshake
	// timeouts, TLS 1.3 at least, and no total timeout (calls may be slow). A
	// bearer token is added per server; redirects are never followed.
	HTTPClient *http.Client
	// ProtocolVersion is the MCP version offered at connect; default the SDK's
	// latest (the server may negotiate an older one).
	ProtocolVersion string
	// Version is the client version agentd reports in initialize.
	Version string
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.ConnectTimeout, 10*time.Second)
	def(&o.CallWait, 5*time.Second)
	def(&o.ReconnectMin, 500*time.Millisecond)
	def(&o.ReconnectMax, 30*time.Second)
	def(&o.PingInterval, 15*time.Second)
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = o.ReconnectMin
	}
	if o.MaxResult <= 0 {
		o.MaxResult = DefaultMaxResult
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS13}, // agentd speaks TLS 1.3 or nothing
			ResponseHeaderTimeout: 0,                                         // a slow tool answers late; the caller's context bounds it
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		}}
	}
	if o.Version == "" {
		o.Version = "dev"
	}
}

// DefaultMaxResult is the default cap on a tool result's text.
const DefaultMaxResult = 64 << 10

// maxTools bounds the tool list of one server, so a server that pages forever
// cannot hold a connect open.
const maxTools = 4096

// Server is one MCP server's session, kept healthy in the background. It
// implements supervisor.ToolServer and supervisor.ToolDescriber and is safe for
// concurrent use. Create it through NewSet.
type Server struct {
	cfg    ServerConfig
	opts   *Options
	log    *slog.Logger
	client *sdk.Client
	http   *http.Client
	kick   chan uint64   // a call found session generation N broken
	relist chan struct{} // the server said its tool list changed

	mu      sync.Mutex // guards the fields below
	cs      *sdk.ClientSession
	gen     uint64        // generation of cs; each connect adds one
	changed chan struct{} // closed and replaced whenever cs changes
	tools   []*sdk.Tool   // last listed, kept while disconnected
	specs   map[string]api.ToolSpec
	lastErr error
	everUp  bool
	tried   bool // a connect attempt has finished, for better or worse

	subKick chan struct{}            // wakes the subscription worker (subscribe.go)
	subsMu  sync.Mutex               // guards subs and every subscription's fields
	subs    map[string]*subscription // by resource uri
}

var (
	_ supervisor.ToolServer    = (*Server)(nil)
	_ supervisor.ToolDescriber = (*Server)(nil)
)

func newServer(cfg ServerConfig, opts *Options) *Server {
	s := &Server{
		cfg:     cfg,
		opts:    opts,
		log:     opts.Logger.With("mcp_server", cfg.Name),
		kick:    make(chan uint64, 1),
		relist:  make(chan struct{}, 1),
		changed: make(chan struct{}),
		lastErr: errNotConnected,
		subKick: make(chan struct{}, 1),
		subs:    make(map[string]*subscription),
	}
	s.http = httpClient(opts.HTTPClient, cfg.Token)
	s.client = sdk.NewClient(&sdk.Implementation{Name: "agentd", Version: opts.Version}, &sdk.ClientOptions{
		Logger:       s.log,
		Capabilities: &sdk.ClientCapabilities{}, // no roots, sampling or elicitation: the supervisor has no model
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.relist <- struct{}{}:
			default:
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			if req.Params != nil {
				s.resourceUpdated(req.Params.URI)
			}
		},
	})
	return s
}

// httpClient is base with the bearer token on every request and redirects
// refused (a redirect must not carry the token elsewhere).
func httpClient(base *http.Client, token string) *http.Client {
	c := *base
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if token != "" {
		c.Transport = &bearer.Transport{Base: rt, Token: bearer.Static(token)}
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// Name returns the server's configured name.
func (s *Server) Name() string { return s.cfg.Name }

// Connected reports whether a session is up now.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs != nil
}

// Tools returns the names of the tools the server last listed, in its order.
func (s *Server) Tools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.tools))
	for i, t := range s.tools {
		out[i] = t.Name
	}
	return out
}

// Describe implements supervisor.ToolDescriber from the last tool list.
func (s *Server) Describe(tool string) (api.ToolSpec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	spec, ok := s.specs[tool]
	return spec, ok
}

// run keeps a session up until ctx ends: connect, watch, and reconnect. A
// session lost after at least ReconnectMax is retried at once; failed connects,
// and sessions that keep dying young, back off.
func (s *Server) run(ctx context.Context) {
	fails := 0
	pause := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		cs, tools, err := s.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d := backoff(fails, s.opts.ReconnectMin, s.opts.ReconnectMax)
			fails++
			s.failed(err)
			s.log.Warn("mcp server unavailable", "err", err, "attempt", fails, "retry_in", d.String())
			if !pause(d) {
				return
			}
			continue
		}
		gen := s.up(cs, tools)
		upAt := time.Now()
		s.log.Info("mcp server connected", "tools", len(tools), "protocol", protocolOf(cs), "generation", gen)
		reason := s.watch(ctx, cs, gen)
		s.down(cs, reason)
		_ = cs.Close()
		if ctx.Err() != nil {
			return
		}
		if time.Since(upAt) >= s.opts.ReconnectMax {
			fails = 0
			s.log.Warn("mcp session lost: reconnecting", "err", reason)
			continue
		}
		d := backoff(fails, s.opts.ReconnectMin, s.opts.ReconnectMax)
		fails++
		s.log.Warn("mcp session lost: reconnecting", "err", reason, "retry_in", d.String())
		if !pause(d) {
			return
		}
	}
}

func protocolOf(cs *sdk.ClientSession) string {
	if r := cs.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}

// backoff is the delay before retry n (from 0): lo doubled n times, capped at
// hi, with up to 25% jitter either way.
func backoff(n int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	if d > hi {
		d = hi
	}
	j := time.Duration(rand.Int64N(int64(d)/2+1)) - d/4
	return d + j
}

// connect opens a session and lists every tool (all pages) within
// ConnectTimeout.
func (s *Server) connect(ctx context.Context) (*sdk.ClientSession, []*sdk.Tool, error) {
	cctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	defer cancel()
	t := &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: s.http}
	cs, err := s.client.Connect(cctx, t, &sdk.ClientSessionOptions{ProtocolVersion: s.opts.ProtocolVersion})
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", s.cfg.URL, err)
	}
	tools, err := s.listTools(cctx, cs)
	if err != nil {
		_ = cs.Close()
		return nil, nil, err
	}
	return cs, tools, nil
}

// listTools reads every page of tools/list. A tool listed twice keeps its
// first definition.
func (s *Server) listTools(ctx context.Context, cs *sdk.ClientSession) ([]*sdk.Tool, error) {
	var tools []*sdk.Tool
	seen := make(map[string]bool)
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		if seen[t.Name] {
			s.log.Warn("mcp server lists a tool twice; keeping the first", "tool", t.Name)
			continue
		}
		if len(tools) == maxTools {
			return nil, fmt.Errorf("list tools: more than %d tools", maxTools)
		}
		seen[t.Name] = true
		tools = append(tools, t)
	}
	return tools, nil
}

// watch returns why the session must be replaced: it ended, a call found it
// broken, a ping failed, or relisting the tools failed.
func (s *Server) watch(ctx context.Context, cs *sdk.ClientSession, gen uint64) error {
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	var tick <-chan time.Time
	if s.opts.PingInterval > 0 {
		t := time.NewTicker(s.opts.PingInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-ended:
			if err == nil {
				err = errors.New("the session ended")
			}
			return err
		case g := <-s.kick:
			if g == gen {
				return errors.New("a call found the session broken")
			}
		case <-tick:
			pctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
			err := cs.Ping(pctx, nil)
			cancel()
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("ping: %w", err)
			}
		case <-s.relist:
			lctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
			tools, err := s.listTools(lctx, cs)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("relist after tools/list_changed: %w", err)
			}
			s.setTools(tools)
			s.log.Info("mcp tool list changed", "tools", len(tools))
		}
	}
}

// up installs a new session and its tools and returns its generation.
func (s *Server) up(cs *sdk.ClientSession, tools []*sdk.Tool) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cs = cs
	s.gen++
	s.lastErr = nil
	s.everUp, s.tried = true, true
	s.setToolsLocked(tools)
	close(s.changed)
	s.changed = make(chan struct{})
	return s.gen
}

// down removes cs if it is still the current session.
func (s *Server) down(cs *sdk.ClientSession, reason error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cs != cs {
		return
	}
	s.cs = nil
	s.lastErr = reason
	close(s.changed)
	s.changed = make(chan struct{})
}

// failed records a failed connect attempt and wakes the waiters.
func (s *Server) failed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastErr = err
	if !s.tried {
		s.tried = true
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

func (s *Server) setTools(tools []*sdk.Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setToolsLocked(tools)
}

func (s *Server) setToolsLocked(tools []*sdk.Tool) {
	s.tools = tools
	s.specs = make(map[string]api.ToolSpec, len(tools))
	for _, t := range tools {
		spec := api.ToolSpec{Name: s.cfg.Name + "/" + t.Name, Description: t.Description}
		if spec.Description == "" {
			spec.Description = t.Title
		}
		if t.InputSchema != nil {
			if b, err := json.Marshal(t.InputSchema); err == nil {
				spec.InputSchema = b
			}
		}
		s.specs[t.Name] = spec
	}
}

// serverState is a snapshot of a Server's session, for waiters.
type serverState struct {
	cs      *sdk.ClientSession // the session, nil while disconnected
	gen     uint64             // its generation
	changed <-chan struct{}    // closed at the next change of cs
	lastErr error              // why the last connect or session failed
	everUp  bool               // a session was up at least once
}

// state returns a snapshot of the session.
func (s *Server) state() serverState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return serverState{cs: s.cs, gen: s.gen, changed: s.changed, lastErr: s.lastErr, everUp: s.everUp}
}

// session returns a session of a generation after `after`, waiting until
// deadline (and ctx) for one to be (re)connected.
func (s *Server) session(ctx context.Context, after uint64, deadline time.Time, log *slog.Logger) (*sdk.ClientSession, uint64, error) {
	var t *time.Timer
	for {
		st := s.state()
		if st.cs != nil && st.gen > after {
			return st.cs, st.gen, nil
		}
		if t == nil {
			wait := time.Until(deadline)
			if wait <= 0 {
				return nil, 0, fmt.Errorf("not connected: %v", st.lastErr)
			}
			log.Info("mcp call waiting for the session", "wait", wait.String())
			t = time.NewTimer(wait)
			defer t.Stop()
		}
		select {
		case <-st.changed:
		case <-t.C:
			return nil, 0, fmt.Errorf("not connected within %s: %v", s.opts.CallWait, s.state().lastErr)
		case <-ctx.Done():
			return nil, 0, context.Cause(ctx)
		}
	}
}

// broken tells the run loop that session generation gen failed a call. A
// stale generation waiting in the channel gives way to the newer one.
func (s *Server) broken(gen uint64) {
	for {
		select {
		case s.kick <- gen:
			return
		default:
		}
		select {
		case old := <-s.kick:
			if old > gen {
				gen = old
			}
		default:
		}
	}
}

// errRejected matches the SDK's "rejected by transport" error: the request
// never reached the server or was refused before it ran (connection refused,
// an HTTP error status, 502/503/504/429), so the call is safe to retry.
var errRejected = &jsonrpc.Error{Code: -32005}

// maxAttempts bounds how often one tool call is sent.
const maxAttempts = 3

// Call implements supervisor.ToolServer: it calls tool with args on the
// server, with the caller's run_id, traceparent and agent path in _meta. Every
// failure is a tool result with IsError set. A call made while the session is
// being (re)connected waits up to CallWait; a call the server never received
// (its session gone, the connection refused) is sent again on the new
// session, within the same wait.
func (s *Server) Call(ctx context.Context, caller supervisor.NodeInfo, tool string, args json.RawMessage) api.ToolResult {
	wire := s.cfg.Name + "/" + tool
	log := s.log.With("tool", tool, "run_id", caller.RunID, "agent_path", caller.AgentPath)
	var arguments any
	if a := bytes.TrimSpace(args); len(a) > 0 && !bytes.Equal(a, []byte("null")) {
		if a[0] != '{' || !json.Valid(a) {
			return api.TextResult(wire+": the arguments must be a JSON object", true)
		}
		arguments = json.RawMessage(a)
	}
	start := time.Now()
	deadline := start.Add(s.opts.CallWait)
	var after uint64
	var lastErr error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		cs, gen, err := s.session(ctx, after, deadline, log)
		if err != nil {
			if lastErr != nil {
				err = fmt.Errorf("%v (last attempt: %v)", err, lastErr)
			}
			log.Warn("mcp call failed: server unavailable", "err", err)
			return api.TextResult(fmt.Sprintf("%s: MCP server %q is unavailable: %v", wire, s.cfg.Name, err), true)
		}
		params := &sdk.CallToolParams{Name: tool, Arguments: arguments, Meta: requestMeta(caller)}
		res, err := cs.CallTool(ctx, params)
		if err == nil {
			out := convertResult(wire, res, s.opts.MaxResult)
			log.Debug("mcp call", "is_error", out.IsError, "ms", time.Since(start).Milliseconds())
			return out
		}
		if ctx.Err() != nil {
			return api.TextResult(fmt.Sprintf("%s: the call was abandoned: %v", wire, context.Cause(ctx)), true)
		}
		if errors.Is(err, sdk.ErrSessionMissing) || errors.Is(err, errRejected) {
			// The server did not run it: reconnect and send it again.
			log.Info("mcp call not delivered: reconnecting", "err", err, "attempt", attempt)
			s.broken(gen)
			after, lastErr = gen, err
			continue
		}
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			// The server answered with a protocol error (an unknown tool,
			// invalid params): the model sees it and may correct itself.
			if caller.LogContent {
				log.Info("mcp call refused by the server", "err", err)
			} else {
				// The server's message may quote the arguments.
				log.Info("mcp call refused by the server", "code", we.Code)
			}
			return api.TextResult(fmt.Sprintf("%s: the server refused the call: %s (code %d)", wire, we.Message, we.Code), true)
		}
		// In flight when the connection failed: it may or may not have run,
		// so it is not sent again.
		s.broken(gen)
		log.Warn("mcp call failed", "err", err)
		return api.TextResult(fmt.Sprintf("%s: the call failed (it may or may not have run): %v", wire, err), true)
	}
	return api.TextResult(fmt.Sprintf("%s: MCP server %q did not take the call after %d attempts: %v", wire, s.cfg.Name, maxAttempts, lastErr), true)
}

// Meta keys agentd puts on every tools/call, with api.MetaAgentPath.
const (
	MetaRunID       = "run_id"
	MetaTraceparent = "traceparent"
)

func requestMeta(caller supervisor.NodeInfo) sdk.Meta {
	m := sdk.Meta{MetaRunID: caller.RunID}
	if caller.Traceparent != "" {
		m[MetaTraceparent] = caller.Traceparent
	}
	if caller.AgentPath != "" {
		m[api.MetaAgentPath] = caller.AgentPath
	}
	return m
}
