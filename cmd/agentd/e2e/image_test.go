package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/testkit"
)

// containersConf is podman's configuration for the image test, given through
// CONTAINERS_CONF (never the machine's /etc): runc, as crun refuses a host
// with a hybrid cgroup layout, and no default ulimits, which runc cannot set
// there either.
const containersConf = `[containers]
default_ulimits = []

[engine]
runtime = "runc"
`

// podman runs podman with the test's configuration and returns its combined
// output and exit code (-1 when it did not run).
func podman(t *testing.T, conf string, within time.Duration, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		return string(out) + err.Error(), -1
	}
	return string(out), 0
}

// The image `make image` builds runs as the Deployment (deploy/k8s/base)
// runs it: read-only root filesystem, uid 65532, every capability dropped,
// no new privileges, the state directory a volume. On loopback (the host's
// network) it serves a task to completion; a grandchild orphaned in it
// reparents to agentd, PID 1, which reaps it; it carries a CA bundle Go
// loads; SIGTERM drains it to exit 0 (issue 34.5: the image had never been
// built or run). It needs podman as root (make image installs it) and skips,
// saying why, where there is none or no container can run.
func TestImage(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman is not installed: `make image` installs it (apt-get, as root)")
	}
	if os.Geteuid() != 0 {
		t.Skip("podman runs containers as root on this machine kind; not root")
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make is not installed")
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte(containersConf), 0o644); err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	name := "agentd-e2e-" + hex.EncodeToString(b[:])
	image := "localhost/" + name + ":test"

	// Build: the Makefile's recipe, into a context of the test's own.
	build := exec.Command(makeBin, "-s", "-C", "../../..", "image", "IMAGE="+image, "IMAGE_CTX="+filepath.Join(dir, "ctx"))
	build.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Cleanup(func() { podman(t, conf, time.Minute, "rmi", "-f", image) })

	// Can a container run here at all? podman's own failures (125) skip.
	if out, code := podman(t, conf, time.Minute, "run", "--rm", "--network", "none", image, "--help"); code != 0 {
		if code == 125 || code == -1 {
			t.Skipf("no container can run here (podman: %s)", strings.TrimSpace(out))
		}
		t.Fatalf("agentd --help in the image: exit %d\n%s", code, out)
	}

	// The helper podman exec runs in the container (static: no libc there).
	helper := filepath.Join(dir, "helper")
	if err := os.MkdirAll(helper, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755) // uid 65532 reaches the helper through it
	hb := exec.Command("go", "build", "-o", filepath.Join(helper, "orphan"), "./testdata/orphan")
	hb.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := hb.CombinedOutput(); err != nil {
		t.Fatalf("build the helper: %v\n%s", err, out)
	}
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, 65532, 65532); err != nil {
		t.Fatal(err)
	}

	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	out, code := podman(t, conf, time.Minute, "run", "-d", "--name", name,
		"--network", "host", "--read-only", "--user", "65532:65532", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--tmpfs", "/tmp:rw,mode=1777", "-v", state+":/var/lib/agentd", "-v", helper+":/helper:ro",
		"-e", "AGENT_LISTEN=127.0.0.1:"+strconv.Itoa(port), "-e", "AGENT_STATE_DIR=/var/lib/agentd",
		"-e", "AGENT_DRAIN_TIMEOUT=10s", "-e", "AGENT_WARM_POOL=0",
		image)
	if code != 0 {
		t.Fatalf("podman run: exit %d\n%s", code, out)
	}
	t.Cleanup(func() { podman(t, conf, time.Minute, "rm", "-f", "-t", "0", name) })
	logs := func() string { out, _ := podman(t, conf, time.Minute, "logs", name); return out }

	// The container is as the Deployment's securityContext makes it.
	out, _ = podman(t, conf, time.Minute, "inspect", "--format",
		"{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}} {{.HostConfig.SecurityOpt}} {{.State.Pid}}", name)
	for _, want := range []string{"65532:65532 true", "no-new-privileges"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect %q lacks %q", strings.TrimSpace(out), want)
		}
	}
	if !strings.Contains(out, "CAP_") || strings.Contains(out, "[]") {
		t.Errorf("inspect %q: not every capability dropped", strings.TrimSpace(out))
	}
	exe := func(args ...string) string {
		t.Helper()
		out, code := podman(t, conf, time.Minute, append([]string{"exec", name, "/helper/orphan"}, args...)...)
		if code != 0 {
			t.Fatalf("exec orphan %v: exit %d\n%s", args, code, out)
		}
		return strings.TrimSpace(out)
	}
	if st := exe("stat", "1"); !strings.HasPrefix(st, "ppid 0 ") {
		t.Errorf("PID 1 in the container: %s, want agentd with no parent in its namespace", st)
	}

	testkit.WaitFor(t, 30*time.Second, "agentd serving in the container", func() bool {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})

	// A task completes through it.
	body := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"img-1","role":"user","parts":[{"kind":"text","text":"hello from the image test"}]}}}`
	resp, err := http.Post(base+"/", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var rr struct {
		Result struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	var raw bytes.Buffer
	raw.ReadFrom(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(raw.Bytes(), &rr); err != nil || rr.Result.Status.State != "completed" {
		t.Fatalf("message/send: %v %s\n%s", err, raw.String(), logs())
	}

	// The image carries CA certificates that Go loads.
	if n, err := strconv.Atoi(exe("certs")); err != nil || n < 10 {
		t.Errorf("the image's CA bundle holds %d certificates (%v)", n, err)
	}

	// A grandchild orphaned in the container reparents to agentd, PID 1,
	// which reaps it when it ends.
	gc := exe("spawn")
	testkit.WaitFor(t, 10*time.Second, "the orphan reparented to PID 1", func() bool {
		return strings.HasPrefix(exe("stat", gc), "ppid 1 ")
	})
	exe("kill", gc)
	testkit.WaitFor(t, 10*time.Second, "the orphan reaped", func() bool {
		st := exe("stat", gc)
		if strings.Contains(st, "state Z") {
			return false // a zombie: not reaped (yet)
		}
		return st == "gone"
	})
	if !strings.Contains(logs(), `"msg":"orphan reaped","orphan":true,"pid":`+gc+`,`) {
		t.Errorf("agentd's log has no reap of orphan %s:\n%s", gc, logs())
	}

	// SIGTERM drains it, and it exits 0.
	if out, code := podman(t, conf, time.Minute, "kill", "--signal", "TERM", name); code != 0 {
		t.Fatalf("podman kill: %s", out)
	}
	out, code = podman(t, conf, time.Minute, "wait", name)
	if code != 0 || strings.TrimSpace(out) != "0" {
		t.Fatalf("after SIGTERM: podman wait says %q (exit %d), want 0\n%s", strings.TrimSpace(out), code, logs())
	}
	if l := logs(); !strings.Contains(l, `"msg":"drained cleanly"`) {
		t.Errorf("no clean drain in the log:\n%s", l)
	}
}
