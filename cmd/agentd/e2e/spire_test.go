//go:build spire

package e2e

// The real-SPIRE test: `make test-spire` builds spire-server and spire-agent
// (cmd/agentd/spire/build.sh) and runs this with AGENTD_SPIRE_BIN set to their
// folder.

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/internal/testkit"
)

// spireProc is one SPIRE process, killed and reaped at cleanup.
type spireProc struct {
	cmd    *exec.Cmd
	logs   *testkit.Buffer
	waited chan struct{}
}

func startSPIRE(t *testing.T, bin string, args ...string) *spireProc {
	t.Helper()
	p := &spireProc{cmd: exec.Command(bin, args...), logs: &testkit.Buffer{}, waited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.waited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.waited
		if t.Failed() {
			t.Logf("%s log:\n%s", filepath.Base(bin), p.logs.String())
		}
	})
	return p
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestSPIRE runs a SPIRE server and agent on 127.0.0.1 (sqlite datastore,
// join-token node attestation, unix workload attestor), registers three
// identities by binary path (agentd A, agentd B, and a client), and has a
// message to A delegated to B (a --route rule to peer:b): A calls B over mTLS,
// each with SVIDs from the real Workload API, A checking B's SPIFFE ID, and
// B's result comes back as A's artifact.
func TestSPIRE(t *testing.T) {
	bins := os.Getenv("AGENTD_SPIRE_BIN")
	if bins == "" {
		t.Fatal("AGENTD_SPIRE_BIN is not set: run `make test-spire`")
	}
	server, agent := filepath.Join(bins, "spire-server"), filepath.Join(bins, "spire-agent")
	// Unix socket paths must stay short.
	dir, err := os.MkdirTemp("", "spire")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port := freePort(t)
	serverSock, agentSock := filepath.Join(dir, "server.sock"), filepath.Join(dir, "agent.sock")
	serverConf := filepath.Join(dir, "server.conf")
	os.WriteFile(serverConf, []byte(fmt.Sprintf(`
server {
    bind_address = "127.0.0.1"
    bind_port = "%d"
    socket_path = %q
    trust_domain = "example.org"
    data_dir = %q
    log_level = "INFO"
}
plugins {
    DataStore "sql" {
        plugin_data {
            database_type = "sqlite3"
            connection_string = %q
        }
    }
    NodeAttestor "join_token" {
        plugin_data {}
    }
    KeyManager "memory" {
        plugin_data {}
    }
}
`, port, serverSock, filepath.Join(dir, "server-data"), filepath.Join(dir, "datastore.sqlite3"))), 0o600)
	startSPIRE(t, server, "run", "-config", serverConf)
	testkit.WaitFor(t, 60*time.Second, "spire-server healthy", func() bool {
		return exec.Command(server, "healthcheck", "-socketPath", serverSock).Run() == nil
	})

	// Three copies of agentd: the unix attestor tells them apart by path.
	binA, binB, binC := filepath.Join(dir, "agentd-a"), filepath.Join(dir, "agentd-b"), filepath.Join(dir, "agentd-client")
	for _, b := range []string{binA, binB, binC} {
		data, err := os.ReadFile(agentdBin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(b, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const nodeID = "spiffe://example.org/node"
	out := run(t, server, "token", "generate", "-socketPath", serverSock, "-spiffeID", nodeID)
	m := regexp.MustCompile(`Token: (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no join token in %q", out)
	}
	const idA, idB, idClient = "spiffe://example.org/agentd-a", "spiffe://example.org/agentd-b", "spiffe://example.org/client"
	for _, e := range []struct{ id, bin string }{{idA, binA}, {idB, binB}, {idClient, binC}} {
		run(t, server, "entry", "create", "-socketPath", serverSock, "-parentID", nodeID, "-spiffeID", e.id, "-selector", "unix:path:"+e.bin)
	}

	agentConf := filepath.Join(dir, "agent.conf")
	os.WriteFile(agentConf, []byte(fmt.Sprintf(`
agent {
    data_dir = %q
    log_level = "INFO"
    server_address = "127.0.0.1"
    server_port = "%d"
    socket_path = %q
    trust_domain = "example.org"
    insecure_bootstrap = true
}
plugins {
    NodeAttestor "join_token" {
        plugin_data {}
    }
    KeyManager "memory" {
        plugin_data {}
    }
    WorkloadAttestor "unix" {
        plugin_data {
            discover_workload_path = true
        }
    }
}
`, filepath.Join(dir, "agent-data"), port, agentSock)), 0o600)
	startSPIRE(t, agent, "run", "-config", agentConf, "-joinToken", m[1])
	testkit.WaitFor(t, 60*time.Second, "spire-agent healthy", func() bool {
		return exec.Command(agent, "healthcheck", "-socketPath", agentSock).Run() == nil
	})

	socket := "unix://" + agentSock
	startAt := func(bin string, args ...string) *service {
		return startServiceAs(t, bin, nil, append([]string{"--spiffe-socket", socket, "--health-listen", "127.0.0.1:0"}, args...)...)
	}
	b := startAt(binB, "--allow-peer", idA, "--operator", idA)
	// A routes every message to B, whose SPIFFE ID it checks.
	a := startAt(binA, "--allow-peer", idClient, "--allow-peer", idB, "--peer", "b="+b.url+",spiffe="+idB, "--route", "*=peer:b")
	probeHTTPS := &http.Client{Timeout: 5 * time.Second, Transport: probeClient.Transport}
	for _, p := range []*service{a, b} {
		testkit.WaitFor(t, 60*time.Second, "ready with an SVID from SPIRE", func() bool {
			resp, err := probeHTTPS.Get("https://" + p.health + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		})
	}
	for _, c := range []struct {
		p  *service
		id string
	}{{a, idA}, {b, idB}} {
		if !strings.Contains(c.p.logs.String(), `"spiffe_id":"`+c.id+`"`) {
			t.Fatalf("agentd did not get %s from the Workload API", c.id)
		}
	}

	// The client sends to A; A delegates to B over mTLS; B's result is A's
	// artifact.
	send := exec.Command(binC, "send", "--to", a.url, "--spiffe-socket", socket, "--server-id", idA, "--timeout", "60s", "from a to b")
	out2, err := send.CombinedOutput()
	if err != nil || !strings.Contains(string(out2), `"from a to b" has 4 words`) {
		t.Fatalf("client send to A: %v\n%s", err, out2)
	}
	accepted := func(p *service) []map[string]any {
		return testkit.WithMsg(testkit.JSONLines(p.logs.String()), a2abind.LogTaskAccepted)
	}
	if acc := accepted(a); len(acc) != 1 || str(acc[0], "spiffe_id") != idClient || str(acc[0], "caller_auth") != "mtls" || str(acc[0], "provider") != "peer:b" {
		t.Fatalf("A's task: %v; want one from %s over mtls, routed to peer:b", acc, idClient)
	}
	if acc := accepted(b); len(acc) != 1 || str(acc[0], "spiffe_id") != idA || str(acc[0], "caller_auth") != "mtls" || str(acc[0], "provider") != "local" {
		t.Fatalf("B's task: %v; want one from %s over mtls, run locally", acc, idA)
	}
	if n := len(childPIDs(testkit.JSONLines(a.logs.String()))); n != 0 {
		t.Fatalf("A ran %d subagents; the work was B's", n)
	}
	if n := len(childPIDs(testkit.JSONLines(b.logs.String()))); n != 1 {
		t.Fatalf("B ran %d subagents, want 1", n)
	}
	// A is B's operator; B is only A's peer.
	ctl := exec.Command(binA, "ctl", "a2a.Tree", "--to", b.url, "--spiffe-socket", socket, "--server-id", idB, "--json")
	if out, err := ctl.CombinedOutput(); err != nil || !bytes.Contains(out, []byte(`"nodes"`)) {
		t.Fatalf("agentd-a ctl a2a.Tree on B: %v\n%s", err, out)
	}
	ctl = exec.Command(binB, "ctl", "a2a.Tree", "--to", a.url, "--spiffe-socket", socket, "--server-id", idA)
	if out, err := ctl.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("-32601")) {
		t.Fatalf("agentd-b ctl a2a.Tree on A (a peer, not an operator): %v\n%s", err, out)
	}
	// The client expects B's ID; A's server certificate is refused.
	wrong := exec.Command(binC, "send", "--to", a.url, "--spiffe-socket", socket, "--server-id", idB, "--timeout", "20s", "x")
	if out, err := wrong.CombinedOutput(); err == nil {
		t.Fatalf("the client accepted A as if it were B:\n%s", out)
	}
	t.Logf("a message to A (%s) was delegated to B (%s) over mTLS with SPIRE-issued SVIDs:\n%s", idA, idB, out2)
}
