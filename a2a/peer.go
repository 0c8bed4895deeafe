package a2a

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"go.opentelemetry.io/otel/trace"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	a2av1 "github.com/agentd/agentd/a2a/v1"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/delegate"
	"github.com/agentd/agentd/tlsconfig"
)

// PeerPrefix prefixes the provider name of every remote peer: "peer:NAME".
const PeerPrefix = "peer:"

// PeerConfig describes one remote A2A peer.
type PeerConfig struct {
	// Name is the peer's name; its provider is PeerPrefix+Name.
	Name string
	// URL is the peer's base URL; its agent card is read from
	// /.well-known/agent-card.json under it.
	URL string
	// SPIFFEID is the identity the peer must present (mTLS); the HTTP client
	// builder enforces it.
	SPIFFEID string
	// BearerTokenFile holds a bearer token sent on every request; re-read when
	// the file changes.
	BearerTokenFile string
	// Timeout bounds each unary call to the peer (card, send, get, cancel) and
	// the connection setup; it never cuts a stream. Default 30s.
	Timeout time.Duration
	Log     *slog.Logger
}

// HTTPClientFunc builds the one shared http.Client a peer is called through.
// It is the seam for transport security: DefaultPeerClient speaks plain http
// (loopback only) or https with the system roots, plus an optional bearer
// token; PeerClients adds mTLS with this service's SVID for a peer whose
// SPIFFE ID is configured, and checks that ID.
type HTTPClientFunc func(PeerConfig) (*http.Client, error)

// Validate checks a peer's configuration: a name, an absolute http(s) URL,
// plain http only to a loopback host.
func (c PeerConfig) Validate() error {
	if c.Name == "" || strings.ContainsAny(c.Name, " =,:/") {
		return fmt.Errorf("peer name %q: want a non-empty name without spaces, '=', ',', ':' or '/'", c.Name)
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("peer %s: URL %q: want http(s)://host[:port][/path]", c.Name, c.URL)
	}
	if u.Scheme == "http" {
		if !loopbackHost(u.Hostname()) {
			return fmt.Errorf("peer %s: plain http is only allowed to a loopback host; use https for %s", c.Name, u.Host)
		}
	}
	if c.Timeout < 0 {
		return fmt.Errorf("peer %s: negative timeout", c.Name)
	}
	if c.SPIFFEID != "" {
		if _, err := spiffeid.FromString(c.SPIFFEID); err != nil {
			return fmt.Errorf("peer %s: spiffe=%q: %w", c.Name, c.SPIFFEID, err)
		}
		if u.Scheme != "https" {
			return fmt.Errorf("peer %s: spiffe= is checked over mTLS, which needs an https URL (got %s)", c.Name, c.URL)
		}
	}
	return nil
}

// loopbackHost reports whether host is "localhost" or a loopback IP.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// DefaultPeerClient returns a keep-alive client for a peer: idle connections
// per host well above Go's default of 2 (so concurrent delegations reuse
// connections instead of paying a handshake each), no total timeout (which
// would cut long streams; calls are bounded by their contexts), and the
// bearer token from BearerTokenFile on every request. A SPIFFE ID needs mTLS,
// which this builder does not do: it refuses the config (PeerClients does).
func DefaultPeerClient(c PeerConfig) (*http.Client, error) {
	if c.SPIFFEID != "" {
		return nil, fmt.Errorf("peer %s: an expected SPIFFE ID needs an mTLS client, which is not configured", c.Name)
	}
	return withBearer(c, peerTransport(c))
}

// PeerClients returns the HTTPClientFunc of a service whose own SPIFFE
// identity is src (nil when it has none). A peer configured with an expected
// SPIFFE ID is called over mTLS: the client presents src's current SVID (a
// rotation applies to the next connection) and accepts only a server that
// presents exactly that ID, verified against src's bundles
// (tlsconfig.PeerHTTPClient); without src such a peer is refused. Any other
// peer gets DefaultPeerClient. Either way it is one keep-alive client per peer
// with the bearer token of BearerTokenFile, if set, on every request.
func PeerClients(src tlsconfig.Source) HTTPClientFunc {
	return func(c PeerConfig) (*http.Client, error) {
		if c.SPIFFEID == "" {
			return DefaultPeerClient(c)
		}
		if src == nil {
			return nil, fmt.Errorf("peer %s: spiffe=%s needs this service's own SVID for mTLS (--spiffe-socket, or --tls-cert/--tls-key/--tls-bundle)", c.Name, c.SPIFFEID)
		}
		id, err := spiffeid.FromString(c.SPIFFEID)
		if err != nil {
			return nil, fmt.Errorf("peer %s: spiffe=%q: %w", c.Name, c.SPIFFEID, err)
		}
		hc := tlsconfig.PeerHTTPClient(src, id)
		tr, ok := hc.Transport.(*http.Transport)
		if !ok {
			return nil, fmt.Errorf("peer %s: unexpected transport %T", c.Name, hc.Transport)
		}
		// The peer's timeout bounds connection setup, as for other peers.
		timeout := peerTimeout(c)
		tr.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
		tr.TLSHandshakeTimeout = timeout
		return withBearer(c, tr)
	}
}

func peerTimeout(c PeerConfig) time.Duration {
	if c.Timeout <= 0 {
		return 30 * time.Second
	}
	return c.Timeout
}

// peerTransport is the transport of one plain or https (system roots) peer's
// shared client: dial and TLS handshake bounded by the peer's timeout, 64 idle
// connections per host.
func peerTransport(c PeerConfig) *http.Transport {
	timeout := peerTimeout(c)
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ExpectContinueTimeout: time.Second,
		// Peers are the mesh: TLS 1.3 at least, as on every listener of agentd
		// (an mTLS peer's config, set by its client func, is 1.3 too).
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13},
	}
}

// withBearer returns the client over base, adding the bearer token of
// c.BearerTokenFile, when one is configured, to every request to the peer's
// own origin (c.URL's scheme and host): a redirect elsewhere is followed
// without it.
func withBearer(c PeerConfig, base *http.Transport) (*http.Client, error) {
	var rt http.RoundTripper = base
	if c.BearerTokenFile != "" {
		tok := &tokenFile{path: c.BearerTokenFile}
		if _, err := tok.token(); err != nil {
			return nil, fmt.Errorf("peer %s: %w", c.Name, err)
		}
		u, err := url.Parse(c.URL)
		if err != nil {
			return nil, fmt.Errorf("peer %s: %w", c.Name, err)
		}
		rt = bearerTransport{base: base, tok: tok, scheme: u.Scheme, host: u.Host}
	}
	return &http.Client{Transport: rt}, nil
}

// tokenFile is a bearer token read from a file, re-read when the file's
// modification time or size changes.
type tokenFile struct {
	path string

	mu    sync.Mutex // guards mod, size, value
	mod   time.Time
	size  int64
	value string
}

func (t *tokenFile) token() (string, error) {
	fi, err := os.Stat(t.path)
	if err != nil {
		return "", fmt.Errorf("bearer token file: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.value != "" && fi.ModTime().Equal(t.mod) && fi.Size() == t.size {
		return t.value, nil
	}
	b, err := os.ReadFile(t.path)
	if err != nil {
		return "", fmt.Errorf("bearer token file: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" || strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("bearer token file %s: want one non-empty line", t.path)
	}
	t.mod, t.size, t.value = fi.ModTime(), fi.Size(), v
	return v, nil
}

type bearerTransport struct {
	base         http.RoundTripper
	tok          *tokenFile
	scheme, host string // the peer's origin: the only one given the token
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != b.scheme || r.URL.Host != b.host {
		return b.base.RoundTrip(r)
	}
	v, err := b.tok.token()
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+v)
	return b.base.RoundTrip(r)
}

// cardTTL is how long a peer's agent card is trusted before it is read again.
const cardTTL = 5 * time.Minute

// Peer is the delegation provider for one remote A2A peer, over a2aclient and
// one shared keep-alive http.Client. Its capabilities come from the peer's
// agent card: all of them when the card declares the agentd contract
// extension, none otherwise. It is safe for concurrent use; create it with
// NewPeer.
type Peer struct {
	cfg PeerConfig
	hc  *http.Client
	log *slog.Logger

	mu       sync.Mutex // guards card, read, client, instance
	card     *a2a.AgentCard
	read     time.Time
	client   *a2aclient.Client
	instance string // the peer's agentd instance id, from its card

	started atomic.Int64 // delegations started, for the spawn metric
}

var (
	_ delegate.Provider = (*Peer)(nil)
	_ delegate.Preparer = (*Peer)(nil)
)

// NewPeer returns the provider for a peer; newClient builds its HTTP client
// (nil means DefaultPeerClient). The card is read on first use.
func NewPeer(cfg PeerConfig, newClient HTTPClientFunc) (*Peer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if newClient == nil {
		newClient = DefaultPeerClient
	}
	hc, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Peer{cfg: cfg, hc: hc, log: cfg.Log.With("peer", cfg.Name)}, nil
}

// Name returns "peer:NAME".
func (p *Peer) Name() string { return PeerPrefix + p.cfg.Name }

// InheritsParentContext is false: the peer sees only the delegation.
func (p *Peer) InheritsParentContext() bool { return false }

// Capabilities reports all start-time capabilities when the peer's card
// declares the agentd contract extension, none otherwise (or before the card
// was read).
func (p *Peer) Capabilities() delegate.Capabilities {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.card != nil && hasContractExtension(p.card) {
		return delegate.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}
	}
	return delegate.Capabilities{}
}

func hasContractExtension(card *a2a.AgentCard) bool {
	return slices.ContainsFunc(card.Capabilities.Extensions, func(e a2a.AgentExtension) bool { return e.URI == ContractExtensionURI })
}

// Prepare reads the peer's agent card if it has not been read in the last
// five minutes.
func (p *Peer) Prepare(ctx context.Context) error {
	p.mu.Lock()
	fresh := p.card != nil && time.Since(p.read) < cardTTL
	p.mu.Unlock()
	if fresh {
		return nil
	}
	return p.Refresh(ctx)
}

// Refresh reads the peer's agent card now and rebuilds the client from it.
func (p *Peer) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	card, err := agentcard.NewResolver(p.hc).Resolve(ctx, p.cfg.URL)
	if err != nil {
		return fmt.Errorf("read the agent card of %s: %w", p.cfg.URL, err)
	}
	client, err := a2aclient.NewFromEndpoints(ctx,
		[]a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: p.endpoint(card)}},
		a2aclient.WithJSONRPCTransport(p.hc),
		a2aclient.WithConfig(a2aclient.Config{Polling: true}),
		a2aclient.WithInterceptors(traceInterceptor{}),
	)
	if err != nil {
		return fmt.Errorf("a2a client for %s: %w", p.cfg.URL, err)
	}
	inst := ""
	for _, e := range card.Capabilities.Extensions {
		if e.URI == ContractExtensionURI {
			inst, _ = e.Params["instance"].(string)
		}
	}
	p.mu.Lock()
	p.card, p.read, p.client, p.instance = card, time.Now(), client, inst
	p.mu.Unlock()
	return nil
}

// endpoint is the JSON-RPC URL to call: the card's, when it is on the
// configured origin; else the configured URL. A card cannot send agentd's
// calls (and credentials) to another host.
func (p *Peer) endpoint(card *a2a.AgentCard) string {
	cu, err1 := url.Parse(card.URL)
	pu, err2 := url.Parse(p.cfg.URL)
	if err1 == nil && err2 == nil && cu.Scheme == pu.Scheme && cu.Host == pu.Host {
		return card.URL
	}
	return p.cfg.URL
}

func (p *Peer) state() (*a2aclient.Client, *a2a.AgentCard, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.client, p.card, p.instance
}

// Start sends the delegation to the peer and returns at once; the run follows
// the remote task (a stream when the peer offers one, else polling), enforces
// the payload's deadline locally (tasks/cancel to the peer on expiry) and maps
// the remote outcome back to a result. A cycle (the peer is already on the
// hop list) or an exhausted depth is refused before anything is sent.
func (p *Peer) Start(ctx context.Context, req delegate.Request) (delegate.Run, error) {
	if err := p.Prepare(ctx); err != nil {
		return nil, err
	}
	client, card, inst := p.state()
	if inst != "" && slices.Contains(req.Hops, inst) {
		return nil, fmt.Errorf("%w: %s (%s) is already on the delegation path %v", ErrCycle, p.Name(), inst, req.Hops)
	}
	// The hop is a level: the peer's root sits one deeper than the
	// delegation. The cap is inclusive, as max_depth is within one agentd.
	depth := req.Depth + 1
	if req.MaxDepth > 0 && depth > req.MaxDepth {
		return nil, fmt.Errorf("%w: %s would run at depth %d, past a cap of %d", ErrDepthExhausted, p.Name(), depth, req.MaxDepth)
	}
	// A depth limit on the delegate travels as a tighter mesh cap.
	maxDepth := delegate.MeshMaxDepth(depth, req.MaxDepth, req.DepthLimit)
	spanCtx, span := startPeerSpan(ctx, p.Name(), &req.Payload) // the message carries its traceparent
	agentd := hasContractExtension(card)
	// The deadline is this side's to enforce: on expiry the peer gets
	// tasks/cancel. The peer's own copy, a backstop should the cancel not
	// arrive, runs PeerDeadlineGrace longer, so the two do not race.
	sent := req.Payload
	if d := sent.Limits.Deadline.D(); d > 0 {
		sent.Limits.Deadline = api.Duration(min(d+PeerDeadlineGrace, api.MaxDeadline))
	}
	var msg *a2a.Message
	if agentd {
		var scope *api.ToolScope
		if len(sent.Scope.Allow) > 0 {
			s := sent.Scope
			scope = &s
		}
		msg = Outbound(sent, scope, req.Hops, depth, maxDepth)
	} else {
		msg = Outbound(sent, nil, req.Hops, depth, maxDepth)
		msg.Parts = msg.Parts[:1] // a plain peer gets the objective as text and the metadata
		msg.Extensions = nil
	}
	deadline := req.Payload.Limits.Deadline.D()
	if deadline <= 0 {
		deadline = api.MaxDeadline
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(spanCtx))
	r := &peerRun{
		span:     span,
		p:        p,
		client:   client,
		handle:   req.Handle,
		agentd:   agentd,
		stream:   card.Capabilities.Streaming,
		done:     make(chan struct{}),
		cancel:   cancel,
		deadline: deadline,
	}
	p.started.Add(1)
	go r.loop(runCtx, msg)
	return r, nil
}

// Started returns how many delegations this peer has been sent.
func (p *Peer) Started() int64 { return p.started.Load() }

// PeerDeadlineGrace is how much longer than the delegation's deadline the
// peer is told it has. The delegating side enforces the deadline itself and
// cancels the remote task when it passes; the peer's own deadline is only the
// backstop.
const PeerDeadlineGrace = 2 * time.Second

// errRunDeadline is the cause of a run's context when its deadline passes.
var errRunDeadline = errors.New("delegation deadline passed")

// runCancelled is the cause of a run's context after Cancel.
type runCancelled struct{ reason string }

func (c runCancelled) Error() string { return "cancelled: " + c.reason }

// peerRun is one delegation to a peer.
type peerRun struct {
	span     trace.Span // the delegation's client span; ends with the run
	p        *Peer
	client   *a2aclient.Client
	handle   string
	agentd   bool
	stream   bool
	deadline time.Duration
	cancel   context.CancelCauseFunc
	done     chan struct{}

	mu       sync.Mutex // guards remoteID, task
	remoteID a2a.TaskID
	task     *a2a.Task // the remote task as last seen
	result   api.SubagentResult
}

func (r *peerRun) ID() string                 { return r.handle }
func (r *peerRun) Done() <-chan struct{}      { return r.done }
func (r *peerRun) Result() api.SubagentResult { <-r.done; return r.result }

// Cancel stops the delegation: tasks/cancel to the peer, status cancelled.
func (r *peerRun) Cancel(reason string) { r.cancel(runCancelled{reason: reason}) }

func (r *peerRun) loop(ctx context.Context, msg *a2a.Message) {
	defer close(r.done)
	defer r.cancel(nil)
	defer func() { endPeerSpan(r.span, r.remote(), r.result) }()
	dctx, stop := context.WithTimeoutCause(ctx, r.deadline, errRunDeadline)
	defer stop()
	err := r.follow(dctx, msg)
	cause := context.Cause(dctx)
	switch {
	case dctx.Err() != nil:
		status, detail := api.StatusDeadline, fmt.Sprintf("the peer did not finish within %s", r.deadline)
		var rc runCancelled
		if errors.As(cause, &rc) {
			status, detail = api.StatusCancelled, rc.Error()
		}
		r.cancelRemote()
		r.result = r.partial(status, detail)
	case err != nil:
		r.p.log.Warn("delegation to peer failed", "task_id", r.handle, "err", err)
		r.result = r.partial(api.StatusCrashed, "peer "+r.p.cfg.Name+": "+err.Error())
	default:
		r.mu.Lock()
		t := r.task
		r.mu.Unlock()
		r.result = resultFromTask(t, r.agentd)
		if !t.Status.State.Terminal() {
			// It waits for input or authentication nobody here will give.
			r.cancelRemote()
		}
	}
}

// follow sends the message and follows the remote task until it ends or
// stops to ask for something (stopped).
func (r *peerRun) follow(ctx context.Context, msg *a2a.Message) error {
	// The send is not cut by a cancel or the deadline: the remote task it
	// creates must be known to be cancelled. It is bounded by the timeout.
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.p.cfg.Timeout)
	res, err := r.client.SendMessage(sendCtx, &a2a.MessageSendParams{Message: msg})
	cancel()
	if err != nil {
		return fmt.Errorf("message/send: %w", err)
	}
	switch v := res.(type) {
	case *a2a.Message:
		// A stateless answer: the whole outcome.
		r.setTask(&a2a.Task{ID: a2a.TaskID(r.handle), Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
			Artifacts: []*a2a.Artifact{{ID: "message", Parts: v.Parts}}})
		return nil
	case *a2a.Task:
		r.setTask(v)
		if stopped(v.Status.State) {
			return nil
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if r.stream {
		r.subscribe(ctx)
		if r.stopped() {
			// The stream carried the end; the whole task (every artifact and
			// the final metadata) is read once. Failing that, the stream's
			// account stands.
			_ = r.refresh(ctx)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return r.poll(ctx)
}

// subscribe follows the remote task's stream until it ends; any stream error
// leaves the rest to polling.
func (r *peerRun) subscribe(ctx context.Context) {
	for ev, err := range r.client.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: r.remote()}) {
		if err != nil {
			return
		}
		r.mu.Lock()
		if t, ok := ev.(*a2a.Task); ok {
			r.task = t
		} else if next, err := nextSnapshot(r.task, ev); err == nil {
			r.task = next
		}
		done := stopped(r.task.Status.State)
		r.mu.Unlock()
		if done {
			return
		}
	}
}

// poll reads the remote task with backoff until it ends or stops.
func (r *peerRun) poll(ctx context.Context) error {
	wait := 50 * time.Millisecond
	for {
		if err := r.refresh(ctx); err != nil && ctx.Err() == nil {
			r.p.log.Debug("tasks/get failed; retrying", "task_id", r.handle, "err", err)
		}
		if r.stopped() {
			return nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// refresh reads the whole remote task (artifacts and metadata included).
func (r *peerRun) refresh(ctx context.Context) error {
	getCtx, cancel := context.WithTimeout(ctx, r.p.cfg.Timeout)
	defer cancel()
	t, err := r.client.GetTask(getCtx, &a2a.TaskQueryParams{ID: r.remote()})
	if err != nil {
		return fmt.Errorf("tasks/get: %w", err)
	}
	r.setTask(t)
	return nil
}

// cancelRemote sends tasks/cancel for the remote task, bounded by the peer's
// timeout and independent of the run's (ended) context.
func (r *peerRun) cancelRemote() {
	id := r.remote()
	if id == "" || r.terminal() {
		return
	}
	ctx, cancel := context.WithTimeout(trace.ContextWithSpan(context.Background(), r.span), r.p.cfg.Timeout)
	defer cancel()
	if t, err := r.client.CancelTask(ctx, &a2a.TaskIDParams{ID: id}); err != nil {
		r.p.log.Warn("tasks/cancel to peer failed", "task_id", r.handle, "err", err)
	} else {
		r.setTask(t)
	}
}

func (r *peerRun) setTask(t *a2a.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.remoteID == "" {
		r.remoteID = t.ID
	}
	r.task = t
}

func (r *peerRun) remote() a2a.TaskID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.remoteID
}

func (r *peerRun) terminal() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.task != nil && r.task.Status.State.Terminal()
}

// stopped reports whether the remote task is as far as it will go: ended,
// or interrupted to ask for input or authentication, which a delegation
// cannot give (resultFromTask reads it as refused).
func (r *peerRun) stopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.task != nil && stopped(r.task.Status.State)
}

func stopped(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// partial is the result of a run this side ended: the status it ended with,
// and whatever the peer had produced and reported so far.
func (r *peerRun) partial(status api.TerminalStatus, detail string) api.SubagentResult {
	r.mu.Lock()
	t := r.task
	r.mu.Unlock()
	res := api.SubagentResult{Status: status, Detail: detail}
	if t != nil {
		got := resultFromTask(t, r.agentd)
		res.Distillate, res.Usage = got.Distillate, got.Usage
	}
	return res
}

// resultFromTask maps a remote task back to a result: the exact status from
// an agentd peer's metadata, else by state (completed, rejected to refused,
// canceled to cancelled, failed to crashed; a peer that stopped to ask for
// input or authentication cannot be answered, so refused); the distillate from
// its artifact; the usage it reported.
func resultFromTask(t *a2a.Task, agentd bool) api.SubagentResult {
	res := api.SubagentResult{}
	if s, ok := t.Metadata[MetaStatus].(string); agentd && ok && api.TerminalStatus(s).Valid() {
		res.Status = api.TerminalStatus(s)
		res.Cause, _ = t.Metadata[MetaCause].(string)
	} else {
		switch t.Status.State {
		case a2a.TaskStateCompleted:
			res.Status = api.StatusCompleted
		case a2a.TaskStateRejected, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired:
			res.Status = api.StatusRefused
		case a2a.TaskStateCanceled:
			res.Status = api.StatusCancelled
		default:
			res.Status = api.StatusCrashed
		}
	}
	if u, ok := t.Metadata[MetaUsage]; ok {
		var usage api.Usage
		if remarshal(u, &usage) == nil && usage.TokensIn >= 0 && usage.TokensOut >= 0 && usage.Steps >= 0 {
			res.Usage = usage
		}
	}
	statusMsg := ""
	if t.Status.Message != nil {
		statusMsg = partsText(t.Status.Message.Parts)
	}
	if res.Status != api.StatusCompleted {
		res.Detail = statusMsg
		if res.Detail == "" {
			res.Detail = "the peer's task ended " + string(t.Status.State)
		}
	}
	arts := t.Artifacts
	if i := slices.IndexFunc(arts, func(a *a2a.Artifact) bool { return a.ID == ArtifactID(t.ID) }); i >= 0 {
		arts = arts[i : i+1]
	}
	res.Distillate = distillateFromParts(arts)
	if len(arts) == 0 && res.Status == api.StatusCompleted && statusMsg != "" {
		res.Distillate = api.InlineText(statusMsg)
	}
	return res
}

// distillateFromParts reads a distillate back from artifacts: a file part with
// text is a stored reference, a single data part is JSON (unwrapping a
// wrapped non-object value), anything else is the text of the text parts.
func distillateFromParts(arts []*a2a.Artifact) api.ResultBody {
	var parts a2a.ContentParts
	for _, a := range arts {
		parts = append(parts, a.Parts...)
	}
	var uri string
	var datas []a2a.DataPart
	for _, p := range parts {
		switch v := p.(type) {
		case a2a.FilePart:
			if f, ok := v.File.(a2a.FileURI); ok && uri == "" {
				uri = f.URI
			}
		case a2a.DataPart:
			datas = append(datas, v)
		}
	}
	text := partsText(parts)
	switch {
	case uri != "":
		return api.ResultBody{Reference: &api.Reference{URI: uri, Summary: text}}
	case len(datas) == 1 && text == "":
		var value any = datas[0].Data
		if w, _ := datas[0].Metadata[a2av1.MetaWrapped].(bool); w {
			value = datas[0].Data["value"]
		}
		if b, err := json.Marshal(value); err == nil {
			return api.ResultBody{Inline: b}
		}
	}
	return api.InlineText(text)
}

func partsText(parts a2a.ContentParts) string {
	var out []string
	for _, p := range parts {
		if t, ok := p.(a2a.TextPart); ok {
			out = append(out, t.Text)
		}
	}
	return strings.Join(out, "\n")
}
