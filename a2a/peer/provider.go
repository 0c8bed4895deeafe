package peer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/a2a/a2acall"
	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/a2arest"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
	"github.com/agentd/agentd/supervisor/delegate"
)

// Prefix prefixes the provider name of every remote peer: "peer:NAME".
const Prefix = "peer:"

// cardTTL is how long a peer's agent card is trusted before it is read again
// when its answer has no Cache-Control max-age.
const cardTTL = 5 * time.Minute

// Transports returns the registry of the transports a peer may be called
// over: A2A 1.0 and 0.3 over JSON-RPC, 1.0 over HTTP+JSON (a2arest) and 1.0
// over gRPC (a2agrpc, with the TLS config, dialer and bearer token of the
// peer's http.Client; it holds connections of its own, so it is closed when
// the provider is done with it).
func Transports() a2acall.Registry {
	reg := a2acall.JSONRPC()
	reg[a2acall.Key{Version: a2acall.Version10, Binding: a2acall.BindingHTTPJSON}] = func(url string, hc *http.Client, opts a2acall.Options) (a2acall.Transport, error) {
		return a2arest.New(url, hc, opts), nil
	}
	reg[a2acall.Key{Version: a2acall.Version10, Binding: a2acall.BindingGRPC}] = func(url string, hc *http.Client, opts a2acall.Options) (a2acall.Transport, error) {
		return a2agrpc.NewFromHTTP(url, hc, a2agrpc.Options{NonBlocking: opts.NonBlocking, Header: opts.Header})
	}
	return reg
}

// held is a transport and the runs using it. A transport the provider
// replaced (the card changed) or dropped (Close) is retired, and closed, if
// it is an io.Closer, when its last run ends.
type held struct {
	t       a2acall.Transport
	refs    int  // runs using t; guarded by Provider.mu
	retired bool // no new run gets t; guarded by Provider.mu
}

// closeTransport closes t if it holds resources of its own.
func closeTransport(t a2acall.Transport) {
	if c, ok := t.(io.Closer); ok {
		_ = c.Close()
	}
}

// Provider is the delegation provider for one remote A2A peer, over
// a2acall and one shared keep-alive http.Client. Its capabilities come from
// the peer's agent card: all of them when the card declares the agentd
// contract extension, none otherwise. It is safe for concurrent use; create
// it with New.
type Provider struct {
	cfg Config
	hc  *http.Client
	log *slog.Logger
	reg a2acall.Registry

	mu       sync.Mutex // guards card, read, ttl, client, iface, offered, instance
	card     *a2a.AgentCard
	read     time.Time
	ttl      time.Duration // how long card is trusted (its Cache-Control)
	client   *held         // nil before the card is read, and after Close
	iface    Interface     // what client calls
	offered  []Interface   // what the card offers
	instance string        // the peer's agentd instance id, from its card

	started atomic.Int64 // delegations started, for the spawn metric
}

var (
	_ delegate.Provider = (*Provider)(nil)
	_ delegate.Preparer = (*Provider)(nil)
)

// New returns the provider for a peer; newClient builds its HTTP client
// (nil means DefaultClient). The card is read on first use.
func New(cfg Config, newClient HTTPClientFunc) (*Provider, error) {
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
		newClient = DefaultClient
	}
	reg := Transports()
	if len(calls(reg, cfg.Version, cfg.Binding)) == 0 {
		return nil, fmt.Errorf("peer %s: version=%s, binding=%s: agentd calls no such transport (it calls %s)",
			cfg.Name, orAny(cfg.Version), orAny(cfg.Binding), orNone(calls(reg, "", "")))
	}
	hc, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Provider{cfg: cfg, hc: hc, reg: reg, log: cfg.Log.With("peer", cfg.Name)}, nil
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

// Name returns "peer:NAME".
func (p *Provider) Name() string { return Prefix + p.cfg.Name }

// InheritsParentContext is false: the peer sees only the delegation.
func (p *Provider) InheritsParentContext() bool { return false }

// Capabilities reports all start-time capabilities when the peer's card
// declares the agentd contract extension, none otherwise (or before the card
// was read).
func (p *Provider) Capabilities() delegate.Capabilities {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.card != nil && hasContractExtension(p.card) {
		return delegate.Capabilities{OutputSchema: true, DepthLimit: true, ToolFilter: true}
	}
	return delegate.Capabilities{}
}

func hasContractExtension(card *a2a.AgentCard) bool {
	return slices.ContainsFunc(card.Capabilities.Extensions, func(e a2a.AgentExtension) bool { return e.URI == a2abind.ContractExtensionURI })
}

// Prepare reads the peer's agent card if the last one read is stale: older
// than its Cache-Control max-age allowed (five minutes without one).
func (p *Provider) Prepare(ctx context.Context) error {
	p.mu.Lock()
	fresh := p.card != nil && time.Since(p.read) < p.ttl
	p.mu.Unlock()
	if fresh {
		return nil
	}
	return p.Refresh(ctx)
}

// Refresh reads the peer's agent card now and rebuilds the client from it:
// the version and binding choose picks from the card, at the interface's URL
// when it is on the configured origin (endpoint).
func (p *Provider) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	pc, ttl, err := fetchCard(ctx, p.hc, p.cfg.URL)
	if err != nil {
		return fmt.Errorf("read the agent card of %s: %w", p.cfg.URL, err)
	}
	in, err := choose(pc.interfaces, p.reg, p.cfg.Version, p.cfg.Binding)
	if err != nil {
		return fmt.Errorf("peer %s: %w", p.cfg.Name, err)
	}
	in.URL = p.endpoint(in)
	card := pc.card
	inst := ""
	for _, e := range card.Capabilities.Extensions {
		if e.URI == a2abind.ContractExtensionURI {
			inst, _ = e.Params["instance"].(string)
		}
	}
	p.mu.Lock()
	changed := p.iface != in || p.client == nil
	p.mu.Unlock()
	var client *held
	if changed {
		// A send answers at once (not blocking): the run follows the task
		// by stream or by polling.
		t, err := p.reg[in.Key()](in.URL, p.hc, a2acall.Options{NonBlocking: true, Header: traceHeader})
		if err != nil {
			return fmt.Errorf("peer %s: A2A %s over %s at %s: %w", p.cfg.Name, in.Version, in.Binding, in.URL, err)
		}
		client = &held{t: t}
	}
	p.mu.Lock()
	var old *held
	if client != nil {
		old, p.client, p.iface = p.client, client, in
	}
	p.card, p.read, p.ttl, p.offered, p.instance = card, time.Now(), ttl, pc.interfaces, inst
	p.mu.Unlock()
	p.release(old, true)
	if changed {
		p.log.Info(LogInterfaceChosen, "version", in.Version, "binding", in.Binding, "url", in.URL, "card_ttl", ttl)
	}
	return nil
}

// release ends one use of h (a run's; none when retire is set, which
// retires h instead), and closes h's transport when it is retired and no
// run uses it any more. A nil h is nothing to release.
func (p *Provider) release(h *held, retire bool) {
	if h == nil {
		return
	}
	p.mu.Lock()
	if retire {
		h.retired = true
	} else {
		h.refs--
	}
	done := h.retired && h.refs == 0
	p.mu.Unlock()
	if done {
		closeTransport(h.t)
	}
}

// Close drops the provider's transport (a gRPC client's connections): at
// once when no delegation uses it, else when the last one ends. A later
// delegation reads the card again and builds a new one.
func (p *Provider) Close() error {
	p.mu.Lock()
	h := p.client
	p.client, p.card = nil, nil
	p.mu.Unlock()
	p.release(h, true)
	return nil
}

// LogInterfaceChosen is the message of the log line naming the version,
// binding and URL a peer is called over, each time they change.
const LogInterfaceChosen = "peer interface chosen"

// endpoint is the URL to call for an interface: its URL, when it is on the
// configured origin; else the configured URL. A card cannot send agentd's
// calls (and credentials) to another host. A gRPC interface's URL is a
// target (host:port, no scheme): it is on the origin when its host is the
// configured URL's, on any port (an agent may serve gRPC on a port of its
// own, as the JavaScript SDK does; a2agrpc sends the bearer token to that
// host alike), and is called as that URL's scheme and its host:port, so an
// https peer is called over TLS and an http one in plaintext.
func (p *Provider) endpoint(in Interface) string {
	pu, err := url.Parse(p.cfg.URL)
	if err != nil {
		return p.cfg.URL
	}
	if in.Binding == a2acall.BindingGRPC {
		t := a2agrpc.Target(in.URL)
		if host, _, err := net.SplitHostPort(t); err == nil && host == pu.Hostname() {
			return pu.Scheme + "://" + t
		}
		return p.cfg.URL
	}
	cu, err := url.Parse(in.URL)
	if err == nil && cu.Scheme == pu.Scheme && cu.Host == pu.Host {
		return in.URL
	}
	return p.cfg.URL
}

// offers says what the peer's card offers: "its card offers 1.0/JSONRPC,
// 0.3/JSONRPC".
func (p *Provider) offers() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var l []string
	for _, in := range p.offered {
		if k := in.Key().String(); !slices.Contains(l, k) {
			l = append(l, k)
		}
	}
	return "its card offers " + orNone(l)
}

// cardOffers reports whether the peer's card offers in's version and binding
// (a pinned pair is called even when it does not).
func (p *Provider) cardOffers(in Interface) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.offered, func(o Interface) bool { return o.Key() == in.Key() })
}

// state returns what a run calls the peer with; the transport is held for
// the run, which releases it when it ends.
func (p *Provider) state() (*held, Interface, *a2a.AgentCard, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == nil || p.card == nil {
		return nil, Interface{}, nil, "", fmt.Errorf("peer %s: closed", p.cfg.Name)
	}
	p.client.refs++
	return p.client, p.iface, p.card, p.instance, nil
}

// Start sends the delegation to the peer and returns at once; the run follows
// the remote task (a stream when the peer offers one, else polling), enforces
// the payload's deadline locally (tasks/cancel to the peer on expiry) and maps
// the remote outcome back to a result. A cycle (the peer is already on the
// hop list) or an exhausted depth is refused before anything is sent. A
// request with ResumeRemote sends no delegation: the answer goes to the
// peer's task it names, which the run then follows as the first did.
func (p *Provider) Start(ctx context.Context, req delegate.Request) (delegate.Run, error) {
	if w := req.ResumeRemote; w != nil && w.Peer != p.Name() {
		return nil, fmt.Errorf("peer %s: resume a delegation to %q: %w", p.Name(), w.Peer, delegate.ErrUnsupportedCapability)
	}
	if err := p.Prepare(ctx); err != nil {
		return nil, err
	}
	client, iface, card, inst, err := p.state()
	if err != nil {
		return nil, err
	}
	if inst != "" && slices.Contains(req.Hops, inst) {
		p.release(client, false)
		return nil, fmt.Errorf("%w: %s (%s) is already on the delegation path %v", a2abind.ErrCycle, p.Name(), inst, req.Hops)
	}
	// The hop is a level: the peer's root sits one deeper than the
	// delegation. The cap is inclusive, as max_depth is within one agentd.
	depth := req.Depth + 1
	if req.MaxDepth > 0 && depth > req.MaxDepth {
		p.release(client, false)
		return nil, fmt.Errorf("%w: %s would run at depth %d, past a cap of %d", a2abind.ErrDepthExhausted, p.Name(), depth, req.MaxDepth)
	}
	// A depth limit on the delegate travels as a tighter mesh cap.
	maxDepth := delegate.MeshMaxDepth(depth, req.MaxDepth, req.DepthLimit)
	spanCtx, span := startPeerSpan(ctx, p.Name(), &req.Payload) // the message carries its traceparent
	agentd := hasContractExtension(card)
	// The deadline is this side's to enforce: on expiry the peer gets
	// tasks/cancel. The peer's own copy, a backstop should the cancel not
	// arrive, runs DeadlineGrace longer, so the two do not race.
	sent := req.Payload
	if d := sent.Limits.Deadline.D(); d > 0 {
		sent.Limits.Deadline = api.Duration(min(d+DeadlineGrace, api.MaxDeadline))
	}
	var msg *a2a.Message
	if agentd {
		var scope *api.ToolScope
		if len(sent.Scope.Allow) > 0 {
			s := sent.Scope
			scope = &s
		}
		msg = a2abind.Outbound(sent, scope, req.Hops, depth, maxDepth)
	} else {
		msg = a2abind.Outbound(sent, nil, req.Hops, depth, maxDepth)
		msg.Parts = msg.Parts[:1] // a plain peer gets the objective as text and the metadata
		msg.Extensions = nil
	}
	msg.ID = MessageID(req)
	deadline := req.Payload.Limits.Deadline.D()
	if deadline <= 0 {
		deadline = api.MaxDeadline
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(spanCtx))
	r := &remoteRun{
		span:     span,
		p:        p,
		held:     client,
		client:   client.t,
		iface:    iface,
		handle:   req.Handle,
		agentd:   agentd,
		stream:   card.Capabilities.Streaming,
		onText:   req.OnText,
		done:     make(chan struct{}),
		cancel:   cancel,
		deadline: deadline,
		under:    req.Payload.AgentPath,
	}
	switch {
	case req.Ask != nil: // a nested spawn's: its questions are the child's
		r.ask = req.Ask
	case req.Asks: // a routed message's: they go to the task's caller
		r.questions = make(chan *supervisor.Question)
		r.ask = r.askRequester
	}
	if w := req.ResumeRemote; w != nil {
		// A resumed delegation: its peer's task exists, waiting on the
		// question w; the answer goes to it, and nothing new is sent.
		go r.loop(runCtx, func(ctx context.Context) error { return r.resumeFollow(ctx, *w, req.Answer) })
		return r, nil
	}
	p.started.Add(1)
	go r.loop(runCtx, func(ctx context.Context) error { return r.follow(ctx, msg) })
	return r, nil
}

// Started returns how many delegations this peer has been sent.
func (p *Provider) Started() int64 { return p.started.Load() }

// DeadlineGrace is how much longer than the delegation's deadline the
// peer is told it has. The delegating side enforces the deadline itself and
// cancels the remote task when it passes; the peer's own deadline is only the
// backstop.
const DeadlineGrace = 2 * time.Second
