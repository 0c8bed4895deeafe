package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testkit"
)

// A --bearer-tokens-file that holds no tokens (comments only) is tokens mode,
// not the development mode (issue 29.1: it ran the development mode, in which
// the local user is the operator, and a SIGHUP that added tokens did not end
// it): the service warns at start, every request without a token is 401, the
// local user's a2a.Tree and /metrics included, and after a SIGHUP loads a
// token that token works while a request without one stays 401.
func TestEmptyTokensFileIsTokensMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("# no tokens yet\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startService(t, "--bearer-tokens-file", path)
	if !strings.Contains(s.logs.String(), "the bearer tokens file holds no tokens") {
		t.Errorf("no warning about the empty tokens file:\n%s", s.logs.String())
	}
	call := func(tok, method, path string) int {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":1,"method":"a2a.Tree"}`))
		}
		req, err := http.NewRequest(method, s.url+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 && method == http.MethodPost {
			var r struct {
				Error *struct{ Code int } `json:"error"`
			}
			if json.Unmarshal(b, &r) != nil || r.Error != nil {
				t.Fatalf("%s %s: %s", method, path, b)
			}
		}
		return resp.StatusCode
	}
	const tok = "late-token-0123456789"
	for _, p := range []string{"/", "/metrics", "/ui/"} {
		method := http.MethodGet
		if p == "/" {
			method = http.MethodPost
		}
		if code := call("", method, p); code != http.StatusUnauthorized {
			t.Errorf("the local user, no token, %s %s: HTTP %d, want 401", method, p, code)
		}
	}
	if code := call(tok, http.MethodPost, "/"); code != http.StatusUnauthorized {
		t.Errorf("a token not yet in the file: HTTP %d", code)
	}

	if err := os.WriteFile(path, []byte(tok+" operator admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the reload", func() bool {
		return strings.Contains(s.logs.String(), "SIGHUP: bearer tokens reloaded")
	})
	if code := call(tok, http.MethodPost, "/"); code != 200 {
		t.Errorf("the token SIGHUP loaded: HTTP %d", code)
	}
	if code := call("", http.MethodPost, "/"); code != http.StatusUnauthorized {
		t.Errorf("no token after the reload: HTTP %d, want 401", code)
	}
	s.stop(t)
}
