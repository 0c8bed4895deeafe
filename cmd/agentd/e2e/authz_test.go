package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd/agentd/tlsconfig"
)

// Against the real binary over mTLS: a task and the distillate it stored are
// readable by the peer that created them and by an operator; another peer of
// the same trust domain is told the task does not exist (in both protocol
// versions) and gets 404 for the blob, as for ids that never existed.
func TestTaskAndBlobReadsAreTheCreators(t *testing.T) {
	t.Parallel()
	dir, ca := devCerts(t, "example.org")
	long := strings.Repeat("a line of the long answer\n", 40)
	script := writeScript(t, "[default]\nanswer "+quote(long)+"\n")
	p := startService(t, "--tls-cert", filepath.Join(dir, "server.pem"), "--tls-key", filepath.Join(dir, "server-key.pem"),
		"--tls-bundle", filepath.Join(dir, tlsconfig.DevBundle), "--allow-trust-domain", "example.org",
		"--operator", "spiffe://example.org/operator", "--intelligence", "builtin:script="+script, "--distillate-budget", "300")
	_, _, otherSVID := mintFiles(t, ca, dir, "other", "spiffe://example.org/other-peer")
	creator := mtlsClient(ca, loadSVID(t, dir, tlsconfig.DevPeerCert, tlsconfig.DevPeerKey))
	other := mtlsClient(ca, otherSVID)
	operator := mtlsClient(ca, loadSVID(t, dir, tlsconfig.DevOperatorCert, tlsconfig.DevOperatorKey))

	r, err := callRPC(t, creator, p.url, "message/send", sendParams("write it long", true), nil)
	if err != nil || r.Error != nil {
		t.Fatalf("send: %v %+v", err, r.Error)
	}
	var task struct {
		ID        string                 `json:"id"`
		Status    struct{ State string } `json:"status"`
		Artifacts []struct {
			Parts []struct {
				Kind string `json:"kind"`
				File struct {
					URI string `json:"uri"`
				} `json:"file"`
			} `json:"parts"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(r.Result, &task); err != nil || task.Status.State != "completed" || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Kind != "file" {
		t.Fatalf("task: %v %s", err, r.Result)
	}
	blobURL := task.Artifacts[0].Parts[0].File.URI
	if !strings.HasPrefix(blobURL, p.url+"/blobs/") {
		t.Fatalf("blob url %q is not on %s", blobURL, p.url)
	}

	answer := func(c *http.Client, version, method string, params any, id string) string {
		t.Helper()
		var hdr map[string]string
		if version != "" {
			hdr = map[string]string{"A2A-Version": version}
		}
		r, err := callRPC(t, c, p.url, method, params, hdr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Error == nil {
			return "ok"
		}
		return fmt.Sprintf("%d %s", r.Error.Code, strings.ReplaceAll(r.Error.Message, id, "ID"))
	}
	for _, m := range []struct{ version, method, key string }{{"", "tasks/get", "id"}, {"1.0", "GetTask", "id"}, {"", "tasks/pushNotificationConfig/list", "id"}} {
		unknown := answer(other, m.version, m.method, map[string]any{m.key: "01a22e00-0000-7000-8000-000000000000"}, "01a22e00-0000-7000-8000-000000000000")
		if got := answer(other, m.version, m.method, map[string]any{m.key: task.ID}, task.ID); got == "ok" || got != unknown {
			t.Errorf("another peer's %s: %q; want the unknown-task answer %q", m.method, got, unknown)
		}
		for name, c := range map[string]*http.Client{"creator": creator, "operator": operator} {
			if got := answer(c, m.version, m.method, map[string]any{m.key: task.ID}, task.ID); got != "ok" {
				t.Errorf("%s's %s: %s", name, m.method, got)
			}
		}
	}

	get := func(c *http.Client, url string) (int, string) {
		t.Helper()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for name, c := range map[string]*http.Client{"creator": creator, "operator": operator} {
		if code, body := get(c, blobURL); code != 200 || body != long {
			t.Errorf("%s reads the blob: %d (%d bytes)", name, code, len(body))
		}
	}
	code, body := get(other, blobURL)
	unknownCode, unknownBody := get(other, p.url+"/blobs/01a22e00-0000-4000-8000-000000000000")
	if code != 404 || code != unknownCode || body != unknownBody {
		t.Errorf("another peer reads the blob: %d %q; want the unknown blob's %d %q", code, body, unknownCode, unknownBody)
	}
}

// quote is a Go-quoted string, as a script's TEXT is written.
func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
