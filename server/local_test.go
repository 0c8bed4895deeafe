package server

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// localFront is the development mode's front on a real loopback listener
// (so the request's local address is the listener's): the operator methods
// over a supervisor that never spawns, and a console stand-in at /ui/.
func localFront(t *testing.T, auth *Auth) *httptest.Server {
	t.Helper()
	sup, err := supervisor.New(supervisor.Config{Executable: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	op := &Operator{Sup: sup, Drain: NewDrainer(time.Second, nil), LameDuck: NewLameDuck()}
	engine := tasks.NewEngine(tasks.NewMemoryStore(10, time.Hour), doneExec{}, nil)
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "console "+r.URL.Path) })
	srv := httptest.NewServer(Handler(Config{Handler: engine, Methods: op.Methods(), Auth: auth, Console: console}))
	t.Cleanup(srv.Close)
	return srv
}

// localCall posts a2a.Tree with hdr (Host among them) and returns the HTTP
// status and the JSON-RPC error code (0 for a result).
func localCall(t *testing.T, srv *httptest.Server, method, path string, hdr map[string]string) (int, int) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"` + api.OpTree + `"}`)
	}
	req, err := http.NewRequest(method, srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || method != http.MethodPost {
		return resp.StatusCode, 0
	}
	var r rpcReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("reply %s: %v", b, err)
	}
	if r.Error != nil {
		return resp.StatusCode, r.Error.Code
	}
	return resp.StatusCode, 0
}

// TestLocalOperator: in the development mode the local user is the
// operator, and nothing else is: a page of another origin (even on this
// machine), a cross-site fetch, and a rebound name are anonymous peers, which
// get -32601 for a2a.* and 403 for the console.
func TestLocalOperator(t *testing.T) {
	srv := localFront(t, nil)
	host := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(host)
	own := "http://" + host
	cases := []struct {
		name     string
		hdr      map[string]string
		operator bool
		status   int // the HTTP status of the JSON-RPC call when not 200
	}{
		{"a plain client (agentd ctl, curl)", nil, true, 0},
		{"the server's own origin", map[string]string{"Origin": own, "Sec-Fetch-Site": "same-origin"}, true, 0},
		{"a typed address (Sec-Fetch-Site none)", map[string]string{"Sec-Fetch-Site": "none"}, true, 0},
		{"localhost with the listener's port", map[string]string{"Host": "localhost:" + port}, true, 0},
		{"[::1] as Host with the listener's port", map[string]string{"Host": "[::1]:" + port}, true, 0},
		{"another loopback origin (another port)", map[string]string{"Origin": "http://127.0.0.1:1"}, false, 0},
		{"the own origin over https", map[string]string{"Origin": "https://" + host}, false, 0},
		{"a null Origin", map[string]string{"Origin": "null"}, false, http.StatusForbidden},
		{"a forged Origin of another site", map[string]string{"Origin": "http://evil.example"}, false, http.StatusForbidden},
		{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, false, 0},
		{"Sec-Fetch-Site same-site", map[string]string{"Sec-Fetch-Site": "same-site"}, false, 0},
		{"DNS rebinding: another name as Host", map[string]string{"Host": "evil.example:" + port}, false, 0},
		{"a loopback Host with another port", map[string]string{"Host": "127.0.0.1:1"}, false, 0},
		{"a loopback Host without a port", map[string]string{"Host": "127.0.0.1"}, false, 0},
		{"a subdomain of localhost", map[string]string{"Host": "a.localhost:" + port}, false, 0},
	}
	// A link to the console followed from another site opens the page (its
	// stream is then same-origin); it opens nothing else.
	nav := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
	if status, _ := localCall(t, srv, http.MethodGet, "/ui/", nav); status != http.StatusOK {
		t.Errorf("a cross-site navigation to /ui/: %d, want 200", status)
	}
	for _, path := range []string{"/ui/events", "/ui/console.js", "/metrics"} {
		if status, _ := localCall(t, srv, http.MethodGet, path, nav); status != http.StatusForbidden && status != http.StatusNotFound {
			t.Errorf("a cross-site navigation to %s: %d, want 403", path, status)
		}
	}
	if status, code := localCall(t, srv, http.MethodPost, "/", nav); status != http.StatusOK || code != CodeMethodNotFound {
		t.Errorf("a cross-site navigation posting a2a.Tree: HTTP %d code %d, want -32601", status, code)
	}
	for _, c := range cases {
		status, code := localCall(t, srv, http.MethodPost, "/", c.hdr)
		wantStatus := c.status
		if wantStatus == 0 {
			wantStatus = http.StatusOK
		}
		wantCode := CodeMethodNotFound
		if c.operator || wantStatus != http.StatusOK {
			wantCode = 0
		}
		if status != wantStatus || code != wantCode {
			t.Errorf("%s: a2a.Tree answered HTTP %d, code %d; want HTTP %d, code %d", c.name, status, code, wantStatus, wantCode)
		}
		uiStatus, _ := localCall(t, srv, http.MethodGet, "/ui/", c.hdr)
		wantUI := http.StatusForbidden
		if c.operator {
			wantUI = http.StatusOK
		}
		if uiStatus != wantUI {
			t.Errorf("%s: GET /ui/ answered %d, want %d", c.name, uiStatus, wantUI)
		}
	}
	// /ui redirects to /ui/, and the console serves only GET.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui", nil)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if status, _ := localCall(t, srv, http.MethodPost, "/ui/", nil); status != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d, want 405", status)
	}
}

// TestOperatorCrossSite: an authenticated operator loses the role on a
// request with a cross-site signal (a browser holding the operator's
// credentials on a page of another origin), and a peer never gains it; with
// authentication configured the local rule does not apply.
func TestOperatorCrossSite(t *testing.T) {
	tokens, err := ParseTokens([]byte(peerToken + " peer ci\n" + operatorToken + " operator admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := localFront(t, &Auth{Tokens: tokens})
	op := map[string]string{"Authorization": "Bearer " + operatorToken}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{"Authorization": op["Authorization"]}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	for _, c := range []struct {
		name     string
		hdr      map[string]string
		operator bool
		status   int
	}{
		{"operator token", op, true, http.StatusOK},
		{"operator token, same origin", with(map[string]string{"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}), true, http.StatusOK},
		{"operator token, cross-site", with(map[string]string{"Sec-Fetch-Site": "cross-site"}), false, http.StatusOK},
		{"operator token, another loopback origin", with(map[string]string{"Origin": "http://localhost:1"}), false, http.StatusOK},
		{"peer token", map[string]string{"Authorization": "Bearer " + peerToken}, false, http.StatusOK},
		{"no credentials from loopback (tokens configured)", nil, false, http.StatusUnauthorized},
	} {
		status, code := localCall(t, srv, http.MethodPost, "/", c.hdr)
		wantCode := CodeMethodNotFound
		if c.operator || c.status != http.StatusOK {
			wantCode = 0
		}
		if status != c.status || code != wantCode {
			t.Errorf("%s: a2a.Tree answered HTTP %d, code %d; want HTTP %d, code %d", c.name, status, code, c.status, wantCode)
		}
		uiStatus, _ := localCall(t, srv, http.MethodGet, "/ui/events", c.hdr)
		wantUI := http.StatusForbidden
		switch {
		case c.operator:
			wantUI = http.StatusOK
		case c.status != http.StatusOK:
			wantUI = c.status
		}
		if uiStatus != wantUI {
			t.Errorf("%s: GET /ui/events answered %d, want %d", c.name, uiStatus, wantUI)
		}
	}
}
