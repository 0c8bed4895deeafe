package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2av1"
)

// Protocol versions a request can arrive through.
const (
	Version03 = "0.3"
	Version10 = a2av1.Version
)

type versionKey struct{}

// WithVersion returns ctx marked with the A2A protocol version the request
// arrived through; push notification configs registered under it get that
// version's payload shape.
func WithVersion(ctx context.Context, v string) context.Context {
	return context.WithValue(ctx, versionKey{}, v)
}

// VersionFrom returns the protocol version of the request, Version03 when
// unmarked.
func VersionFrom(ctx context.Context) string {
	if v, ok := ctx.Value(versionKey{}).(string); ok && v != "" {
		return v
	}
	return Version03
}

// ErrPushRefused refuses a webhook URL: a bad URL, or an address in a range
// agentd does not call (SSRF protection). Its text is part of the refusal a
// client reads in the JSON-RPC error's detail, so it carries no package
// prefix.
var ErrPushRefused = errors.New("push notification url refused")

// PushPolicy decides which webhook addresses agentd may call. Loopback,
// link-local, private (RFC 1918, RFC 4193), shared (RFC 6598), unspecified and
// multicast addresses, and IPv6 addresses that lead to one of them (NAT64,
// 6to4, IPv4-compatible), are refused unless a prefix in Allow covers them.
// The zero value refuses them all. It is safe for concurrent use.
type PushPolicy struct {
	Allow []netip.Prefix
	// Resolver resolves host names at registration; nil uses the default.
	Resolver *net.Resolver
}

var (
	sharedRange = netip.MustParsePrefix("100.64.0.0/10")
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	nat64       = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052: the IPv4 address in the last 32 bits
	nat64Local  = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215: local-use translation, never the internet
	sixToFour   = netip.MustParsePrefix("2002::/16")      // RFC 3056: the IPv4 address in bits 16..47
	v4Compat    = netip.MustParsePrefix("::/96")          // deprecated IPv4-compatible addresses
)

// CheckAddr refuses an address in a forbidden range that Allow does not cover.
// An IPv6 address that carries an IPv4 one (mapped, NAT64, 6to4,
// IPv4-compatible) is judged by the IPv4 address it reaches.
func (p PushPolicy) CheckAddr(ip netip.Addr) error {
	ip = ip.Unmap()
	for _, pre := range p.Allow {
		if pre.Contains(ip) {
			return nil
		}
	}
	check := ip
	b := ip.As16()
	switch {
	case nat64Local.Contains(ip):
		return fmt.Errorf("%w: %s is a local-use NAT64 address", ErrPushRefused, ip)
	case nat64.Contains(ip), v4Compat.Contains(ip) && !ip.IsLoopback() && !ip.IsUnspecified():
		check = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	case sixToFour.Contains(ip):
		check = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	}
	switch {
	case check.IsLoopback():
		return fmt.Errorf("%w: %s is a loopback address", ErrPushRefused, ip)
	case check.IsLinkLocalUnicast(), check.IsLinkLocalMulticast():
		return fmt.Errorf("%w: %s is a link-local address", ErrPushRefused, ip)
	case check.IsPrivate(), sharedRange.Contains(check):
		return fmt.Errorf("%w: %s is a private address", ErrPushRefused, ip)
	case check.IsUnspecified(), thisNetwork.Contains(check), check.IsMulticast(), !check.IsGlobalUnicast():
		return fmt.Errorf("%w: %s is not a unicast internet address", ErrPushRefused, ip)
	}
	return nil
}

// CheckURL checks a webhook URL at registration: http or https, a host, and
// every address the host resolves to allowed. A host that does not resolve now
// is accepted (DNS may be briefly unavailable); the address actually dialed is
// checked again at every delivery, so a name that later resolves to a refused
// range is never called.
func (p PushPolicy) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrPushRefused, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: scheme %q: want http or https", ErrPushRefused, u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%w: %q has no host", ErrPushRefused, raw)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.CheckAddr(ip)
	}
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") {
		for _, ip := range []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()} {
			if err := p.CheckAddr(ip); err != nil {
				return err
			}
		}
		return nil
	}
	r := p.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil // checked again, on the dialed address, at delivery
	}
	for _, ip := range addrs {
		if err := p.CheckAddr(ip); err != nil {
			return fmt.Errorf("%w (%s resolves to it)", err, host)
		}
	}
	return nil
}

// control is the dialer hook that checks the resolved address of every
// connection a delivery opens.
func (p PushPolicy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: dial %s: %v", ErrPushRefused, address, err)
	}
	return p.CheckAddr(ap.Addr())
}

// PushSettings configure push notification delivery. Zero fields take their
// defaults.
type PushSettings struct {
	Policy   PushPolicy
	Attempts int           // delivery attempts per event and webhook; default 3
	Backoff  time.Duration // wait before the second attempt, doubling after; default 500ms
	Timeout  time.Duration // per attempt; default 10s
	// QueueLimit bounds the events waiting per task; the oldest non-final one
	// is dropped beyond it. Default 64.
	QueueLimit int
	Log        *slog.Logger
	// Journal, when set, records every event before it is queued and
	// forgets it once delivered (or given up on) to every webhook, so that
	// deliveries pending when the process ends are made after it restarts
	// (Resume): at least once. A Durable store implements it.
	Journal PushJournal
}

// PendingPush is one event waiting for delivery to a task's webhooks, with the
// payload of each protocol version: Snapshot (the task after the event) for
// 0.3 registrations, Event (the event as a StreamResponse) for 1.0 ones.
type PendingPush struct {
	Seq      int64
	TaskID   a2a.TaskID
	Snapshot []byte
	Event    []byte
	Final    bool
}

// Pusher delivers a task's events to its webhooks: in order per task, each
// event to every webhook registered at delivery time, with bounded retries. A
// 0.3 registration receives the task snapshot after the event (as a2a-go
// does); a 1.0 registration receives the event as a StreamResponse. It is safe
// for concurrent use; create it with NewPusher and stop it with Close.
type Pusher struct {
	cfg     PushSettings
	client  *http.Client
	targets func(context.Context, a2a.TaskID) ([]PushTarget, error)

	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex                // guards queues, idle
	queues map[a2a.TaskID]*pushQueue // one per task with a running drain
	idle   chan struct{}             // closed when the last drain exits; nil if none waits
}

// pushItem is one queued event: its payloads, encoded once.
type pushItem struct {
	PendingPush
	journaled bool // in the journal: forgotten there once delivered
}

type pushQueue struct {
	items []pushItem // guarded by Pusher.mu
}

// NewPusher returns a pusher that reads a task's webhooks from targets (a
// Store's ListPush) at each delivery.
func NewPusher(cfg PushSettings, targets func(context.Context, a2a.TaskID) ([]PushTarget, error)) *Pusher {
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.QueueLimit <= 0 {
		cfg.QueueLimit = 64
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, Control: cfg.Policy.control}
	transport := &http.Transport{
		Proxy:               nil, // a proxy would dial for us, past the address check
		DialContext:         dialer.DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: cfg.Timeout,
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pusher{
		cfg:     cfg,
		targets: targets,
		client: &http.Client{
			Transport: transport,
			// A redirect is not followed: the webhook is the registered URL.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		ctx:    ctx,
		cancel: cancel,
		queues: make(map[a2a.TaskID]*pushQueue),
	}
}

// Policy returns the address policy the pusher enforces.
func (p *Pusher) Policy() PushPolicy { return p.cfg.Policy }

// Enqueue schedules the delivery of ev (and the snapshot after it) to the
// task's webhooks. It never blocks on the network; with a journal, it records
// the event first.
func (p *Pusher) Enqueue(id a2a.TaskID, ev a2a.Event, snap *a2a.Task) {
	item, err := newPushItem(id, ev, snap)
	if err != nil {
		p.cfg.Log.Error("push payload does not encode", "task_id", id, "err", err)
		return
	}
	if p.cfg.Journal != nil {
		seq, err := p.cfg.Journal.AddPending(p.ctx, item.PendingPush)
		if err != nil {
			p.cfg.Log.Warn("push notification not journaled: delivered unless agentd stops first", "task_id", id, "err", err)
		} else {
			item.Seq, item.journaled = seq, true
		}
	}
	p.enqueue(item)
}

// EnqueueJournaled is Enqueue of a task's end that its terminal write has
// journaled already (EndJournal.PutEnd returned seq).
func (p *Pusher) EnqueueJournaled(id a2a.TaskID, ev a2a.Event, snap *a2a.Task, seq int64) {
	item, err := newPushItem(id, ev, snap)
	item.Seq, item.journaled = seq, true
	if err != nil {
		// Left in the journal: the next process builds it from the stored
		// snapshot (Resume).
		p.cfg.Log.Error("push payload does not encode: delivered after a restart", "task_id", id, "err", err)
		return
	}
	p.enqueue(item)
}

// newPushItem encodes an event's payloads, once for every webhook.
func newPushItem(id a2a.TaskID, ev a2a.Event, snap *a2a.Task) (pushItem, error) {
	item := pushItem{PendingPush: PendingPush{TaskID: id, Final: snap.Status.State.Terminal()}}
	var err error
	if item.Snapshot, err = json.Marshal(snap); err == nil {
		item.Event, err = json.Marshal(a2av1.EventFrom(ev))
	}
	return item, err
}

// journaled reports whether p's journal is j: a pusher delivers, and clears,
// the ends j's PutEnd journals.
func (p *Pusher) journaled(j EndJournal) bool {
	if p.cfg.Journal == nil || !reflect.TypeOf(p.cfg.Journal).Comparable() || !reflect.TypeOf(j).Comparable() {
		return false // == of an uncomparable journal would panic
	}
	return p.cfg.Journal == PushJournal(j)
}

// endEvent fills the event payload of an end journaled by PutEnd from its
// snapshot: the task's final status, as the status update that ended it.
func endEvent(pp *PendingPush) error {
	var t a2a.Task
	if err := json.Unmarshal(pp.Snapshot, &t); err != nil {
		return fmt.Errorf("decode the journaled snapshot: %w", err)
	}
	ev := &a2a.TaskStatusUpdateEvent{TaskID: t.ID, ContextID: t.ContextID, Status: t.Status, Final: true}
	b, err := json.Marshal(a2av1.EventFrom(ev))
	if err != nil {
		return err
	}
	pp.Event = b
	return nil
}

// Resume queues the events the journal still holds: those a previous
// process did not deliver. Call it once, at start.
func (p *Pusher) Resume(ctx context.Context) error {
	if p.cfg.Journal == nil {
		return nil
	}
	pending, err := p.cfg.Journal.Pending(ctx)
	if err != nil {
		return fmt.Errorf("read pending push notifications: %w", err)
	}
	for _, pp := range pending {
		item := pushItem{PendingPush: pp, journaled: true}
		if len(pp.Event) == 0 {
			if err := endEvent(&item.PendingPush); err != nil {
				p.cfg.Log.Error("journaled push notification dropped", "task_id", pp.TaskID, "err", err)
				p.forget(item)
				continue
			}
		}
		p.enqueue(item)
	}
	if len(pending) > 0 {
		p.cfg.Log.Info("resumed pending push notifications", "pending", len(pending))
	}
	return nil
}

func (p *Pusher) enqueue(item pushItem) {
	id := item.TaskID
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return
	}
	q, running := p.queues[id]
	if !running {
		q = &pushQueue{}
		p.queues[id] = q
	}
	if len(q.items) >= p.cfg.QueueLimit {
		drop := 0
		for drop < len(q.items)-1 && q.items[drop].Final {
			drop++
		}
		p.cfg.Log.Warn("push queue full: dropping an event", "task_id", id)
		p.forget(q.items[drop])
		q.items = append(q.items[:drop], q.items[drop+1:]...)
	}
	q.items = append(q.items, item)
	if !running {
		go p.drain(id, q)
	}
}

// forget removes a delivered (or dropped) event from the journal.
func (p *Pusher) forget(item pushItem) {
	if !item.journaled {
		return
	}
	if err := p.cfg.Journal.DonePending(context.WithoutCancel(p.ctx), item.Seq); err != nil {
		p.cfg.Log.Warn("delivered push notification not cleared from the journal: it may be delivered again", "task_id", item.TaskID, "err", err)
	}
}

// drain delivers a task's queued events in order, then exits; the next
// Enqueue starts a new drain.
func (p *Pusher) drain(id a2a.TaskID, q *pushQueue) {
	for {
		p.mu.Lock()
		if len(q.items) == 0 || p.ctx.Err() != nil {
			delete(p.queues, id)
			if len(p.queues) == 0 && p.idle != nil {
				close(p.idle)
				p.idle = nil
			}
			p.mu.Unlock()
			return
		}
		item := q.items[0]
		q.items = q.items[1:]
		p.mu.Unlock()
		targets, err := p.targets(p.ctx, id)
		if err != nil && p.ctx.Err() != nil {
			continue // stopping: the journal keeps it
		}
		delivered := true
		for _, t := range targets {
			delivered = p.deliver(id, t, item) && delivered
		}
		if delivered {
			p.forget(item)
		}
	}
}

// deliver sends one event to one webhook, retrying transport errors, 408, 429
// and 5xx answers up to the attempt limit with doubling backoff. It reports
// false when the pusher stopped before the event was delivered or given up
// on (the journal keeps it for the next process).
func (p *Pusher) deliver(id a2a.TaskID, t PushTarget, item pushItem) bool {
	body := item.Snapshot
	if t.Version == Version10 {
		body = item.Event
	}
	wait := p.cfg.Backoff
	for attempt := 1; attempt <= p.cfg.Attempts; attempt++ {
		retry, err := p.post(t.Config, body)
		if err == nil {
			return true
		}
		if p.ctx.Err() != nil {
			return false
		}
		if !retry || attempt == p.cfg.Attempts {
			p.cfg.Log.Warn("push notification not delivered", "task_id", id, "url", t.Config.URL, "attempts", attempt, "err", err)
			return true
		}
		select {
		case <-time.After(wait):
		case <-p.ctx.Done():
			return false
		}
		wait *= 2
	}
	return true
}

func (p *Pusher) post(c a2a.PushConfig, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("X-A2A-Notification-Token", c.Token)
	}
	if c.Auth != nil && c.Auth.Credentials != "" && len(c.Auth.Schemes) > 0 {
		req.Header.Set("Authorization", c.Auth.Schemes[0]+" "+c.Auth.Credentials)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return !errors.Is(err, ErrPushRefused), err
	}
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	retry = resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
	return retry, fmt.Errorf("webhook answered %s", resp.Status)
}

// Close stops every delivery and waits for the workers to exit.
func (p *Pusher) Close() {
	p.mu.Lock()
	p.cancel()
	p.mu.Unlock()
	_ = p.Wait(context.Background())
}

// Wait blocks until every queued event has been delivered (or given up on),
// or ctx ends.
func (p *Pusher) Wait(ctx context.Context) error {
	p.mu.Lock()
	if len(p.queues) == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
