package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestJavaScriptSDK drives agentd with the JavaScript A2A SDK at a spec 0.3
// release (0.3.14) and a spec 1.0 release (1.3.0), the latter over JSON-RPC
// and over HTTP+JSON (1.0-rest): card, send, stream, get,
// cancel and the error for an unknown task (cmd/agentd/e2e/js/conformance.mjs). `make
// test` installs the SDKs; without node or them this test fails, it does not
// skip.
func TestJavaScriptSDK(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node (Node.js 20+) is required for the JavaScript SDK tests: install it, then run `make test`")
	}
	dir, _ := filepath.Abs("js")
	for _, mod := range []string{"a2a-js-03", "a2a-js-10"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", mod, "package.json")); err != nil {
			t.Fatalf("the JavaScript SDK %s is not installed in cmd/agentd/e2e/js/node_modules: run `make test` (it runs npm ci there)", mod)
		}
	}
	// A think time keeps a non-blocking send's task running long enough to
	// cancel it.
	s := startService(t, "--intelligence", "builtin:demo=300ms")
	for _, version := range []string{"0.3", "1.0", "1.0-rest"} {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "conformance.mjs", version, s.url)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			t.Logf("node conformance.mjs %s:\n%s", version, out)
			if err != nil {
				t.Fatalf("the %s SDK checks failed: %v", version, err)
			}
		})
	}
}
