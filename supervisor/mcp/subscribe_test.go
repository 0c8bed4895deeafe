package mcp

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testkit"
)

// updates collects what a subscription hands over.
type updates struct {
	mu  sync.Mutex
	got []ResourceUpdate
}

func (u *updates) add(x ResourceUpdate) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.got = append(u.got, x)
}

func (u *updates) all() []ResourceUpdate {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]ResourceUpdate(nil), u.got...)
}

// waitText waits for an update whose text is want and returns it.
func (u *updates) waitText(t *testing.T, reason, want string) ResourceUpdate {
	t.Helper()
	var found ResourceUpdate
	testkit.WaitFor(t, 10*time.Second, "an update "+reason+" with "+want, func() bool {
		for _, x := range u.all() {
			if x.Err == nil && x.Reason == reason && x.Text(0) == want {
				found = x
				return true
			}
		}
		return false
	})
	return found
}

// A subscription reads the resource right after every resources/subscribe:
// at the first connect, and again after the server restarts, so a change made
// while the server (or agentd) was away is seen although no notification
// announced it. An update notification is followed by a read.
func TestSubscribeReadsAfterEverySubscribe(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		name := "sessions"
		if stateless {
			name = "stateless"
		}
		t.Run(name, func(t *testing.T) { testSubscribeReads(t, stateless) })
	}
}

func testSubscribeReads(t *testing.T, stateless bool) {
	ts := newTestServerMode(t, "", stateless)
	ts.setValue("v1", false)
	set, err := NewSet(Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := set.Server("t")
	var got updates
	// Subscribed before Start: the first session arms it.
	stop, err := srv.Subscribe(testResource, got.add)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, err := srv.Subscribe(testResource, got.add); !errors.Is(err, ErrSubscribed) {
		t.Fatalf("a second Subscribe = %v, want ErrSubscribed", err)
	}
	set.Start()
	defer set.Close()

	first := got.waitText(t, ReasonSubscribed, "v1")
	if first.Server != "t" || first.URI != testResource || first.Contents[0].MIMEType != "text/plain" {
		t.Fatalf("first update: %+v", first)
	}
	if n := ts.subscribed(); n != 1 {
		t.Fatalf("the server saw %d subscribes, want 1", n)
	}

	ts.setValue("v2", true)
	got.waitText(t, ReasonUpdated, "v2")

	// The server goes away; its value changes while it is down (no session
	// hears of it); it comes back knowing none of the old sessions.
	ts.stop()
	testkit.WaitFor(t, 10*time.Second, "session loss noticed", func() bool { return !srv.Connected() })
	ts.setValue("v3 changed while down", false)
	ts.start()
	again := got.waitText(t, ReasonSubscribed, "v3 changed while down")
	if again.Generation <= first.Generation {
		t.Fatalf("the re-read is on generation %d, the first on %d", again.Generation, first.Generation)
	}
	testkit.WaitFor(t, 10*time.Second, "re-subscribed on the new session", func() bool { return ts.subscribed() >= 2 })
	ts.setValue("v4", true)
	got.waitText(t, ReasonUpdated, "v4")

	// After unsubscribing, updates are no longer handed over. A new
	// subscriber is the barrier: the worker serves one server in order, so
	// once it has the update the old one would have had it too.
	stop()
	if subs := srv.Subscriptions(); len(subs) != 0 {
		t.Fatalf("Subscriptions after unsubscribe = %v", subs)
	}
	n := len(got.all())
	var next updates
	stop2, err := srv.Subscribe(testResource, next.add)
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	next.waitText(t, ReasonSubscribed, "v4")
	ts.setValue("v5", true)
	next.waitText(t, ReasonUpdated, "v5")
	for _, x := range got.all()[n:] {
		t.Fatalf("an update after unsubscribe: %+v", x)
	}
}

// A subscription made while the session is up is armed on it at once.
func TestSubscribeWhileConnected(t *testing.T) {
	ts := newTestServer(t, "")
	ts.setValue("now", false)
	set, err := NewSet(Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	set.Start()
	defer set.Close()
	srv, _ := set.Server("t")
	testkit.WaitFor(t, 10*time.Second, "connected", srv.Connected)
	var got updates
	stop, err := srv.Subscribe(testResource, got.add)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	got.waitText(t, ReasonSubscribed, "now")
}

// A resource that cannot be read is reported as an update with Err, naming
// the resource; nothing else breaks.
func TestSubscribeUnknownResourceReportsError(t *testing.T) {
	ts := newTestServer(t, "")
	set, err := NewSet(Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	set.Start()
	defer set.Close()
	srv, _ := set.Server("t")
	var got updates
	stop, err := srv.Subscribe("test://no-such-resource", got.add)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	testkit.WaitFor(t, 10*time.Second, "an error update", func() bool {
		for _, x := range got.all() {
			if x.Err != nil && strings.Contains(x.Err.Error(), "resources/read test://no-such-resource on t") {
				return true
			}
		}
		return false
	})
	if !srv.Connected() {
		t.Fatal("a failed read broke the session")
	}
}

// Text caps the rendered content and says what it cut; blobs are described.
func TestResourceUpdateText(t *testing.T) {
	u := ResourceUpdate{Contents: []ResourceContent{{Text: strings.Repeat("é", 10)}, {URI: "x://b", MIMEType: "image/png", Blob: []byte("1234")}}}
	if got := u.Text(0); got != strings.Repeat("é", 10)+"\n[blob x://b image/png, 4 bytes: not shown]" {
		t.Fatalf("Text = %q", got)
	}
	got := u.Text(5)
	if !strings.HasPrefix(got, "éé\n[agentd: result truncated: 4 of ") {
		t.Fatalf("capped Text = %q", got)
	}
}
