package mcp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource subscriptions. A subscription lives on the Server, not on one
// session: on every session (the first and each reconnect) the Server sends
// resources/subscribe for each subscribed URI and, right after it,
// resources/read, and hands the content to the subscriber as an update with
// Reason ReasonSubscribed. That read turns the edge-triggered
// notifications/resources/updated into level-triggered state across a
// restart or a lost session: a change made while agentd was down or
// disconnected is seen at the next connect. Every notifications/resources/
// updated for a subscribed URI is followed by a resources/read, handed over
// with Reason ReasonUpdated; notifications that arrive while a read is under
// way coalesce into one more read.

// Why a ResourceUpdate was delivered.
const (
	// ReasonSubscribed is the read right after a resources/subscribe: at the
	// first connect and after every reconnect.
	ReasonSubscribed = "subscribed"
	// ReasonUpdated is the read after a notifications/resources/updated.
	ReasonUpdated = "updated"
)

// MsgSubscribed is the log message of a resources/subscribe that succeeded
// (with the uri and the session's generation).
const MsgSubscribed = "mcp resource subscribed"

// ErrSubscribed refuses a second subscription to the same URI on one server.
var ErrSubscribed = errors.New("mcp: already subscribed to this resource")

// ResourceContent is one content item of a resource as resources/read returned
// it: text, or a blob.
type ResourceContent struct {
	URI      string
	MIMEType string
	Text     string
	Blob     []byte
}

// ResourceUpdate is what a subscriber is handed: the resource's current
// content, or the error that kept agentd from subscribing or reading it.
type ResourceUpdate struct {
	Server     string
	URI        string
	Reason     string // ReasonSubscribed or ReasonUpdated
	Generation uint64 // the session it was read on; a reconnect adds one
	Contents   []ResourceContent
	// Err is set when the subscribe or the read failed; Contents is then empty.
	// The server retries at its next session.
	Err error
}

// Text renders the contents as text for a seed: text items as they are, a
// blob described in a line, capped at max bytes (cut on a UTF-8 boundary,
// with a note saying what was cut). A max of zero or less means
// DefaultMaxResult.
func (u ResourceUpdate) Text(max int) string {
	if max <= 0 {
		max = DefaultMaxResult
	}
	var texts []string
	for _, c := range u.Contents {
		if c.Blob != nil && c.Text == "" {
			texts = append(texts, fmt.Sprintf("[blob %s %s, %d bytes: not shown]", c.URI, c.MIMEType, len(c.Blob)))
			continue
		}
		texts = append(texts, c.Text)
	}
	var b strings.Builder
	for i, c := range capTexts(texts, max) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.Text)
	}
	return b.String()
}

// subscription is one subscribed URI. Its fields are guarded by Server.subsMu.
type subscription struct {
	fn    func(ResourceUpdate)
	armed uint64 // the session generation it was subscribed on; 0 for none
	dirty bool   // an update notification is waiting for its read
}

// Subscribe subscribes to the resource uri on this server, on the current
// session if one is up and on every later one, and calls fn with the
// resource's content after each subscribe and each update (see the package's
// subscription notes in subscribe.go). fn is called from one goroutine per
// server, one update at a time, in order; it must not block for long (hand the
// update to a channel). Subscribe works before and after Set.Start; updates
// flow once the Set is started. The returned function ends the subscription
// (sending resources/unsubscribe if a session is up); it is safe to call more
// than once.
func (s *Server) Subscribe(uri string, fn func(ResourceUpdate)) (unsubscribe func(), err error) {
	if uri == "" {
		return nil, errors.New("mcp: subscribe: empty resource uri")
	}
	s.subsMu.Lock()
	if _, dup := s.subs[uri]; dup {
		s.subsMu.Unlock()
		return nil, fmt.Errorf("%w: %s %s", ErrSubscribed, s.cfg.Name, uri)
	}
	sub := &subscription{fn: fn}
	s.subs[uri] = sub
	s.subsMu.Unlock()
	s.kickSubs()
	return func() { s.unsubscribe(uri, sub) }, nil
}

func (s *Server) unsubscribe(uri string, sub *subscription) {
	s.subsMu.Lock()
	if s.subs[uri] != sub {
		s.subsMu.Unlock()
		return
	}
	delete(s.subs, uri)
	armed := sub.armed
	s.subsMu.Unlock()
	st := s.state()
	if st.cs == nil || armed != st.gen {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.ConnectTimeout)
	defer cancel()
	if err := st.cs.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: uri}); err != nil {
		s.log.Info("mcp resources/unsubscribe failed", "uri", uri, "err", err)
	}
}

// Subscriptions returns the subscribed URIs, sorted.
func (s *Server) Subscriptions() []string {
	s.subsMu.Lock()
	defer s.subsMu.Unlock()
	out := make([]string, 0, len(s.subs))
	for uri := range s.subs {
		out = append(out, uri)
	}
	sort.Strings(out)
	return out
}

// kickSubs wakes the subscription worker.
func (s *Server) kickSubs() {
	select {
	case s.subKick <- struct{}{}:
	default:
	}
}

// resourceUpdated handles notifications/resources/updated: a subscribed URI
// gets a read; any other is ignored.
func (s *Server) resourceUpdated(uri string) {
	s.subsMu.Lock()
	sub, ok := s.subs[uri]
	if ok {
		sub.dirty = true
	}
	s.subsMu.Unlock()
	if ok {
		s.kickSubs()
	} else {
		s.log.Debug("mcp update for a resource not subscribed", "uri", uri)
	}
}

// subscriptions is the worker that arms every subscription on every session
// and reads updated resources, until ctx ends.
func (s *Server) subscriptions(ctx context.Context) {
	for {
		st := s.state()
		if st.cs != nil {
			s.serveSubs(ctx, st.cs, st.gen)
		}
		select {
		case <-ctx.Done():
			return
		case <-st.changed:
		case <-s.subKick:
		}
	}
}

// subWork is one thing the worker does for a URI on a session.
type subWork struct {
	uri    string
	sub    *subscription
	reason string
}

// serveSubs subscribes (and reads) every URI not yet armed on session gen,
// then reads every URI an update notification marked.
func (s *Server) serveSubs(ctx context.Context, cs *sdk.ClientSession, gen uint64) {
	for ctx.Err() == nil {
		var work []subWork
		s.subsMu.Lock()
		for uri, sub := range s.subs {
			switch {
			case sub.armed != gen:
				sub.armed, sub.dirty = gen, false
				work = append(work, subWork{uri, sub, ReasonSubscribed})
			case sub.dirty:
				sub.dirty = false
				work = append(work, subWork{uri, sub, ReasonUpdated})
			}
		}
		s.subsMu.Unlock()
		if len(work) == 0 {
			return
		}
		sort.Slice(work, func(i, j int) bool { return work[i].uri < work[j].uri })
		for _, w := range work {
			u := s.subscribeAndRead(ctx, cs, gen, w.uri, w.reason)
			if ctx.Err() != nil {
				return
			}
			s.subsMu.Lock()
			live := s.subs[w.uri] == w.sub
			s.subsMu.Unlock()
			if live {
				w.sub.fn(u)
			}
		}
	}
}

// subscribeAndRead sends resources/subscribe (for ReasonSubscribed) and then
// resources/read, each bounded by ConnectTimeout. A request the session could
// not deliver marks the session broken, so the server reconnects and the
// subscription is armed again on the new session.
func (s *Server) subscribeAndRead(ctx context.Context, cs *sdk.ClientSession, gen uint64, uri, reason string) ResourceUpdate {
	u := ResourceUpdate{Server: s.cfg.Name, URI: uri, Reason: reason, Generation: gen}
	log := s.log.With("uri", uri, "generation", gen)
	fail := func(op string, err error) ResourceUpdate {
		if errors.Is(err, sdk.ErrSessionMissing) || errors.Is(err, errRejected) {
			s.broken(gen)
		}
		u.Err = fmt.Errorf("%s %s on %s: %w", op, uri, s.cfg.Name, err)
		log.Warn("mcp subscription: "+op+" failed", "err", err)
		return u
	}
	if reason == ReasonSubscribed {
		if r := cs.InitializeResult(); r == nil || r.Capabilities == nil || r.Capabilities.Resources == nil || !r.Capabilities.Resources.Subscribe {
			return fail("resources/subscribe", errors.New("the server does not offer resource subscriptions"))
		}
		sctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
		err := cs.Subscribe(sctx, &sdk.SubscribeParams{URI: uri})
		cancel()
		if err != nil {
			return fail("resources/subscribe", err)
		}
		log.Info(MsgSubscribed)
	}
	rctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout)
	res, err := cs.ReadResource(rctx, &sdk.ReadResourceParams{URI: uri})
	cancel()
	if err != nil {
		return fail("resources/read", err)
	}
	for _, c := range res.Contents {
		if c == nil {
			continue
		}
		u.Contents = append(u.Contents, ResourceContent{URI: c.URI, MIMEType: c.MIMEType, Text: c.Text, Blob: c.Blob})
	}
	log.Debug("mcp resource read", "reason", reason, "contents", len(u.Contents))
	return u
}
