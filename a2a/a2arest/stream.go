package a2arest

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/a2av1"
)

// DefaultKeepAlive is how often an idle stream gets an SSE comment when the
// caller names no interval.
const DefaultKeepAlive = 15 * time.Second

// WriteStream answers a streaming route with events as server-sent events
// (the specification's section 11.7): each event's data is the 1.0
// StreamResponse. An error before the first event is no stream: it is
// answered as a unary route's error is (statusOf shapes it; retryAfter
// positive sets Retry-After), since clients read an error status before
// they read a stream. An error after it ends the stream with an event
// named "error" whose data is the error body ({"error": Status}). An idle
// stream gets an SSE comment every keepAlive. WriteStream returns when the
// events end, an error is written, a write fails, or ctx (the request's)
// is done. events is called with a context WriteStream cancels when it
// returns, and WriteStream waits for the events to end, so no goroutine is
// left behind once it returns (the events must end when their context does).
func WriteStream(ctx context.Context, w http.ResponseWriter, events func(context.Context) iter.Seq2[a2a.Event, error], keepAlive time.Duration, statusOf func(error) (Status, int)) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		WriteError(w, Status{Code: http.StatusInternalServerError, Status: "INTERNAL", Message: "streaming is not supported on this connection"}, 0)
		return
	}
	type item struct {
		ev  a2a.Event
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan item)
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	go func() {
		defer close(done)
		defer close(items)
		for ev, err := range events(ctx) {
			select {
			case items <- item{ev, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var first *item
	select {
	case v, more := <-items:
		if more {
			first = &v
		}
	case <-ctx.Done():
		return
	}
	if first != nil && first.err != nil {
		st, retry := statusOf(first.err)
		WriteError(w, st, retry)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	if first == nil {
		return
	}
	if keepAlive <= 0 {
		keepAlive = DefaultKeepAlive
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var it item
		if first != nil {
			it, first = *first, nil
		} else {
			select {
			case v, more := <-items:
				if !more {
					return
				}
				it = v
			case <-tick.C:
				if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
					return
				}
				flusher.Flush()
				continue
			case <-ctx.Done():
				return
			}
		}
		var b []byte
		var err error
		prefix := "data: "
		if it.err != nil {
			st, _ := statusOf(it.err)
			b, err = json.Marshal(ErrorBody{Error: st})
			prefix = "event: error\ndata: "
		} else {
			b, err = json.Marshal(a2av1.EventFrom(it.ev))
		}
		if err != nil {
			return
		}
		if _, err := io.WriteString(w, prefix+string(b)+"\n\n"); err != nil {
			return
		}
		flusher.Flush()
		if it.err != nil {
			return
		}
	}
}
