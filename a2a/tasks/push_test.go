package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

func TestPushPolicy(t *testing.T) {
	var p PushPolicy
	refused := []string{
		"http://127.0.0.1/h", "http://127.9.9.9:8080/h", "http://[::1]/h", "http://localhost:8888/webhook",
		"http://api.localhost/h", "http://10.1.2.3/h", "http://172.16.0.1/h", "http://192.168.1.1/h",
		"http://169.254.169.254/latest/meta-data", "http://[fe80::1]/h", "http://[fc00::1]/h",
		"http://[::ffff:127.0.0.1]/h", "http://100.64.0.1/h", "http://0.0.0.0/h", "http://[::]/h",
		"http://224.0.0.1/h", "http://[64:ff9b::a00:1]/h",
		// IPv4 inside IPv6: 6to4 (127.0.0.1, 10.0.0.1), IPv4-compatible,
		// local-use NAT64.
		"http://[2002:7f00:1::]/h", "http://[2002:a00:1::1]/h", "http://[::127.0.0.1]/h", "http://[::a00:1]/h",
		"http://[64:ff9b:1::a00:1]/h",
		"ftp://8.8.8.8/h", "file:///etc/passwd", "http:///nohost", "::not a url",
	}
	for _, u := range refused {
		if err := p.CheckURL(context.Background(), u); !errors.Is(err, ErrPushRefused) {
			t.Errorf("%s: %v, want refused", u, err)
		}
	}
	for _, u := range []string{"https://8.8.8.8/h", "http://[2001:4860:4860::8888]/h", "https://hook.invalid./x", "http://[2002:808:808::1]/h"} {
		if err := p.CheckURL(context.Background(), u); err != nil {
			t.Errorf("%s refused: %v", u, err)
		}
	}
	allow := PushPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	for _, u := range []string{"http://127.0.0.1:9/h", "http://localhost:8888/webhook", "http://[::1]/h"} {
		if err := allow.CheckURL(context.Background(), u); err != nil {
			t.Errorf("allowed %s refused: %v", u, err)
		}
	}
	if err := allow.CheckURL(context.Background(), "http://10.0.0.1/h"); err == nil {
		t.Error("an allowance for loopback let a private address through")
	}
}

// webhook is a test receiver that answers each request with the next status
// in statuses (200 when they run out) and records what it got.
type webhook struct {
	mu       sync.Mutex
	statuses []int
	got      []*http.Request
	bodies   []string
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.mu.Lock()
	w.got = append(w.got, r)
	w.bodies = append(w.bodies, string(b))
	code := 200
	if len(w.statuses) > 0 {
		code, w.statuses = w.statuses[0], w.statuses[1:]
	}
	w.mu.Unlock()
	rw.WriteHeader(code)
}

func (w *webhook) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.got)
}

func loopbackOK() PushPolicy {
	return PushPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
}

func deliverOne(t *testing.T, policy PushPolicy, target PushTarget, statuses ...int) *webhook {
	t.Helper()
	hook := &webhook{statuses: statuses}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	if target.Config.URL == "" {
		target.Config.URL = srv.URL + "/hook"
	}
	p := NewPusher(PushSettings{Policy: policy, Attempts: 3, Backoff: time.Millisecond, Timeout: 5 * time.Second},
		func(context.Context, a2a.TaskID) ([]PushTarget, error) { return []PushTarget{target}, nil })
	task := &a2a.Task{ID: "t1", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	ev := a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, nil)
	p.Enqueue("t1", ev, task)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	return hook
}

func TestPusherSendsTokenAndAuth(t *testing.T) {
	hook := deliverOne(t, loopbackOK(), PushTarget{Version: Version03, Config: a2a.PushConfig{
		Token: "tok-1", Auth: &a2a.PushAuthInfo{Schemes: []string{"Bearer"}, Credentials: "cred"},
	}})
	if hook.count() != 1 {
		t.Fatalf("%d deliveries", hook.count())
	}
	r := hook.got[0]
	if r.Header.Get("X-A2A-Notification-Token") != "tok-1" || r.Header.Get("Authorization") != "Bearer cred" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers: %v", r.Header)
	}
	var task a2a.Task
	if err := json.Unmarshal([]byte(hook.bodies[0]), &task); err != nil || task.ID != "t1" {
		t.Fatalf("0.3 payload is not the task: %s", hook.bodies[0])
	}
}

func TestPusherV1PayloadIsStreamResponse(t *testing.T) {
	hook := deliverOne(t, loopbackOK(), PushTarget{Version: Version10})
	if !strings.HasPrefix(hook.bodies[0], `{"statusUpdate":{"taskId":"t1"`) {
		t.Fatalf("1.0 payload: %s", hook.bodies[0])
	}
}

func TestPusherRetriesAreBounded(t *testing.T) {
	if n := deliverOne(t, loopbackOK(), PushTarget{}, 503, 502).count(); n != 3 {
		t.Fatalf("two failures then success: %d attempts, want 3", n)
	}
	if n := deliverOne(t, loopbackOK(), PushTarget{}, 500, 500, 500, 500, 500).count(); n != 3 {
		t.Fatalf("always failing: %d attempts, want the limit of 3", n)
	}
	if n := deliverOne(t, loopbackOK(), PushTarget{}, 400).count(); n != 1 {
		t.Fatalf("a 400 was retried: %d attempts", n)
	}
}

// The address is checked again when a delivery dials, whatever was checked at
// registration: a webhook on a refused address never gets a request.
func TestPusherChecksTheDialedAddress(t *testing.T) {
	if n := deliverOne(t, PushPolicy{}, PushTarget{}).count(); n != 0 {
		t.Fatalf("a loopback webhook was called %d times without an allowance", n)
	}
}

func TestPusherDoesNotFollowRedirects(t *testing.T) {
	inner := &webhook{}
	target := httptest.NewServer(inner)
	defer target.Close()
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	deliverOne(t, loopbackOK(), PushTarget{Config: a2a.PushConfig{URL: redirect.URL}})
	if inner.count() != 0 {
		t.Fatal("a redirect was followed")
	}
}
