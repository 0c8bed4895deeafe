package trigger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentd/agentd/api"
)

// Subscription is one --subscribe SERVER=URI: a resource of a configured MCP
// server whose changes start the root.
type Subscription struct {
	Server string
	URI    string
}

// ParseSubscription parses SERVER=URI. Whether SERVER is configured is the
// caller's check.
func ParseSubscription(s string) (Subscription, error) {
	server, uri, ok := strings.Cut(s, "=")
	server, uri = strings.TrimSpace(server), strings.TrimSpace(uri)
	if !ok || server == "" || uri == "" {
		return Subscription{}, fmt.Errorf("%q: want SERVER=URI", s)
	}
	return Subscription{Server: server, URI: uri}, nil
}

// String returns SERVER=URI, as --subscribe names it.
func (s Subscription) String() string { return s.Server + "=" + s.URI }

// Key is the restart governor's key of the subscription's session.
func (s Subscription) Key() string { return "trigger:reactive:" + s.String() }

// Update is what a subscription delivers: the resource's current content
// (already rendered as text, and capped), or why it could not be had.
type Update struct {
	// Reason is "subscribed" for the read right after a resources/subscribe
	// (at start and after every reconnect) and "updated" after an update
	// notification.
	Reason string
	Text   string
	Err    error
}

// Subscriber subscribes to sub and calls fn with every update until the
// returned cancel is called; cmd adapts the mcp package's Server.Subscribe.
// fn must be safe to call from another goroutine and does not block.
type Subscriber func(sub Subscription, fn func(Update)) (cancel func(), err error)

// DefaultDebounce is the default debounce window of a reactive trigger.
const DefaultDebounce = 250 * time.Millisecond

// Reactive runs the root when a subscribed resource changes, one session per
// subscription, each with the resource's current content as a seed slice. The
// first update after a quiet spell opens a window of Debounce; the updates
// inside it coalesce, and at its end one run starts with the latest content.
// An update that comes while a run is under way follows Overlap (default
// OverlapQueue: the latest content runs next). A failed run is restarted
// under the restart governor with the same content, unless newer content
// waits. The subscription reads the resource right after every subscribe, so
// the read at start (and after a reconnect) triggers a run with the current
// state: a change made while agentd was down is not missed.
//
// Set the fields, then call Run once; the zero value has no subscription and
// Run refuses it.
type Reactive struct {
	Options
	Subs      []Subscription
	Subscribe Subscriber
	Debounce  time.Duration // default DefaultDebounce; negative: none
	Overlap   Overlap
}

// SeedLabel is the label of the seed slice a reactive run gets.
func SeedLabel(sub Subscription) string {
	return "resource " + sub.URI + " (MCP server " + sub.Server + ")"
}

// Run subscribes and runs until ctx ends (every running run cancelled and
// waited for) or, with StopOnBreaker, until a subscription's breaker opens.
func (r *Reactive) Run(ctx context.Context) error {
	if err := r.check(); err != nil {
		return err
	}
	if r.Subscribe == nil || len(r.Subs) == 0 {
		return errors.New("trigger: reactive: no subscriptions")
	}
	debounce := r.Debounce
	if debounce == 0 {
		debounce = DefaultDebounce
	}
	overlap := r.Overlap
	if overlap == "" {
		overlap = OverlapQueue
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(r.Subs))
	for _, sub := range r.Subs {
		sess := newSession(&r.Options, sub.Key(), overlap)
		d := &debouncer{kick: make(chan struct{}, 1), log: r.Logger, sub: sub}
		stop, err := r.Subscribe(sub, d.put)
		if err != nil {
			cancel(err)
			wg.Wait()
			return fmt.Errorf("trigger: subscribe %s: %w", sub, err)
		}
		defer stop()
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := sess.serve(ctx); !errors.Is(err, context.Canceled) {
				errs <- err
				cancel(err)
			}
		}()
		go func() {
			defer wg.Done()
			d.run(ctx, debounce, sess)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// debouncer coalesces a subscription's updates.
type debouncer struct {
	log  *slog.Logger
	sub  Subscription
	kick chan struct{}

	mu     sync.Mutex // guards latest
	latest *Update
}

// put takes an update: content waits for the window, an error is logged (it
// starts no run, and keeps the content already waiting).
func (d *debouncer) put(u Update) {
	if u.Err != nil {
		d.log.Warn("trigger: reactive: no run for this update", "trigger_server", d.sub.Server, "trigger_resource", d.sub.URI, "reason", u.Reason, "err", u.Err)
		return
	}
	d.mu.Lock()
	d.latest = &u
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *debouncer) take() *Update {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := d.latest
	d.latest = nil
	return u
}

// run turns updates into events: the first content opens a window, and the
// window's latest content becomes one event.
func (d *debouncer) run(ctx context.Context, window time.Duration, sess *session) {
	sub := d.sub
	var ready *Update // content waiting for the window's end
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
			u := d.take()
			if u == nil {
				continue
			}
			ready = u
			if timer == nil {
				if window <= 0 {
					timer = closedTime
				} else {
					timer = time.After(window)
				}
			}
			d.log.Debug("trigger: reactive: update", "trigger_resource", sub.URI, "reason", u.Reason)
		case <-timer:
			timer = nil
			u := ready
			ready = nil
			if u == nil {
				continue
			}
			text := u.Text
			if text == "" {
				text = "(the resource is empty)"
			}
			ev := Event{Mode: ModeReactive, Server: sub.Server, URI: sub.URI, Reason: u.Reason,
				Seed: []api.SeedSlice{{Label: SeedLabel(sub), Content: api.SeedContent{Text: text}}}}
			if !sess.offer(ctx, ev) {
				return
			}
		}
	}
}

// closedTime is a channel that always has a time ready: no debounce window.
var closedTime = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()
