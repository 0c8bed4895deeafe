package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// heldHook is a webhook that records the task id and status state of each
// notification it takes. While held, a delivery hangs (until release, or the
// test's end) and is not recorded: the sender is killed with it in flight.
type heldHook struct {
	*httptest.Server
	hold   atomic.Bool
	mu     sync.Mutex
	told   []notice // guarded by mu
	closed chan struct{}
}

// notice is one notification a heldHook took.
type notice struct{ task, state string }

// newHeldHook starts a heldHook, held; the test's end releases and closes it.
func newHeldHook(t *testing.T) *heldHook {
	h := &heldHook{closed: make(chan struct{})}
	h.hold.Store(true)
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		if h.hold.Load() {
			<-h.closed // the delivery hangs until the sender is gone
			return
		}
		h.mu.Lock()
		h.told = append(h.told, notice{body.ID, body.Status.State})
		h.mu.Unlock()
	}))
	t.Cleanup(func() {
		close(h.closed)
		h.Close()
	})
	return h
}

// release lets the deliveries from now on through.
func (h *heldHook) release() { h.hold.Store(false) }

// states is the states the hook was told of, in order.
func (h *heldHook) states() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s []string
	for _, n := range h.told {
		s = append(s, n.state)
	}
	return s
}

// toldOf reports whether the hook was told that task (any, if "") reached
// state.
func (h *heldHook) toldOf(task, state string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.told, func(n notice) bool { return (task == "" || n.task == task) && n.state == state })
}

// wantFailedLast fails the test unless the hook was told of events before
// a failed end, and of that end last.
func (h *heldHook) wantFailedLast(t *testing.T, what string) {
	t.Helper()
	s := h.states()
	if len(s) < 2 || slices.Index(s, "failed") != len(s)-1 {
		t.Fatalf("the webhook was told %v: want %s, then failed", s, what)
	}
}
