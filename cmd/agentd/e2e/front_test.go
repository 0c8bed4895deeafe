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
	t.Parallel()
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

// Every secret file is refused alike when its group or others may open it
// (issue 29.3: only the bearer tokens file was): exit 2, naming the setting
// and the mode, before anything is served or connected. Each file is 0644 and
// would otherwise be read.
func TestSecretFileModeExit2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certs := filepath.Join(dir, "certs")
	if out, code := runCombined(t, "certs", "init", "--trust-domain", "example.org", "--dir", certs); code != 0 {
		t.Fatalf("certs init: exit %d: %s", code, out)
	}
	if err := os.Chmod(filepath.Join(certs, "server-key.pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := secret("key", "sk-0123456789\n")
	dsn := secret("dsn", "postgres://agentd:pw@127.0.0.1:1/agentd\n")
	tok := secret("tok", "tok-0123456789abcdef\n")
	serve := []string{"serve", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state"), "--warm-pool", "0"}
	for _, tc := range []struct {
		setting string
		args    []string
	}{
		{"--intelligence-key-file", append(serve, "--intelligence", "http://127.0.0.1:1/v1", "--model", "m", "--intelligence-key-file", key)},
		{"--store-dsn-file", append(serve, "--store", "postgres", "--store-dsn-file", dsn)},
		{"--mcp-token-file", append(serve, "--mcp", "x=http://127.0.0.1:1/mcp", "--mcp-token-file", "x="+tok)},
		{"--peer", append(serve, "--peer", "p=http://127.0.0.1:1,token-file="+tok)},
		{"--tls-key", append(serve, "--tls-cert", filepath.Join(certs, "server.pem"), "--tls-key", filepath.Join(certs, "server-key.pem"), "--tls-bundle", filepath.Join(certs, "bundle.pem"))},
		{"--token-file", []string{"send", "--to", "http://127.0.0.1:1", "--token-file", tok, "hello"}},
	} {
		out, code := runCombined(t, tc.args...)
		if code != 2 || !strings.Contains(out, tc.setting) || !strings.Contains(out, "0644") {
			t.Errorf("%s: exit %d, want 2 naming the setting and the mode: %s", tc.setting, code, out)
		}
	}
}
