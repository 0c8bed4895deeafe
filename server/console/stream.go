package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// EventName is the SSE event type of a snapshot.
const EventName = "snapshot"

// serveEvents is GET /ui/events: a text/event-stream whose events (type
// EventName, data an Event) carry the snapshot first, then each changed
// one. It looks at the service when Recent reports a change (after a short
// coalescing pause) and on every tick, and sends only what differs from the
// last event sent; an idle stream gets a comment every KeepAlive. It ends
// when the client goes or Close is called, after sending the snapshot at
// that moment if it changed.
func (c *Console) serveEvents(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	if r.Method == http.MethodHead {
		return
	}
	var changed <-chan struct{}
	if c.cfg.Recent != nil {
		ch, stop := c.cfg.Recent.subscribe()
		defer stop()
		changed = ch
	}
	tick := time.NewTicker(c.cfg.Tick)
	defer tick.Stop()
	keep := time.NewTicker(c.cfg.KeepAlive)
	defer keep.Stop()
	var soon <-chan time.Time // the coalescing pause after a push
	var last []byte
	seq := 0
	send := func() error {
		snap := c.Snapshot()
		b, err := json.Marshal(snap)
		if err != nil {
			return fmt.Errorf("console: encode snapshot: %w", err)
		}
		if bytes.Equal(b, last) {
			return nil
		}
		last = b
		seq++
		at, _ := time.Now().UTC().MarshalJSON()
		var buf bytes.Buffer
		buf.WriteString("event: " + EventName + "\nid: " + strconv.Itoa(seq) + "\ndata: {\"at\":")
		buf.Write(at)
		buf.WriteString(",\"snapshot\":")
		buf.Write(b)
		buf.WriteString("}\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		flusher.Flush()
		keep.Reset(c.cfg.KeepAlive)
		return nil
	}
	// The first event goes out at once, so a client sees the headers and
	// the state without waiting.
	if err := send(); err != nil {
		c.cfg.Log.Debug("console stream ended", "err", err)
		return
	}
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-c.close:
			_ = send()
			return
		case <-changed:
			if soon == nil {
				soon = time.After(coalesce)
			}
		case <-soon:
			soon = nil
			err = send()
		case <-tick.C:
			err = send()
		case <-keep.C:
			if _, err = w.Write([]byte(": keep-alive\n\n")); err == nil {
				flusher.Flush()
			}
		}
		if err != nil {
			c.cfg.Log.Debug("console stream ended", "err", err)
			return
		}
	}
}
