package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/agentd/agentd/a2a/peer"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/tlsconfig"
)

// Two agentd processes over A2A 1.0's HTTP+JSON binding (binding=HTTP+JSON
// on A's --peer): A delegates to B once with its SPIFFE SVID over mTLS and
// once with a bearer token; B records each caller on its task, the work is
// B's, and A logs the HTTP+JSON interface as the one chosen.
func TestMeshOverHTTPJSON(t *testing.T) {
	t.Parallel()
	dir, ca := devCerts(t, "example.org")
	const idA, idB = "spiffe://example.org/agentd-a", "spiffe://example.org/agentd-b"
	certA, keyA, _ := mintFiles(t, ca, dir, "agentd-a", idA)
	certB, keyB, _ := mintFiles(t, ca, dir, "agentd-b", idB)
	bundle := filepath.Join(dir, tlsconfig.DevBundle)
	const token = "rest-peer-token-5d1c8e0a"
	tokens, tokenFile := filepath.Join(dir, "tokens"), filepath.Join(dir, "token")
	if err := os.WriteFile(tokens, []byte(token+" peer alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	b := startService(t, "--tls-cert", certB, "--tls-key", keyB, "--tls-bundle", bundle, "--allow-peer", idA, "--bearer-tokens-file", tokens)
	a := startService(t, "--tls-cert", certA, "--tls-key", keyA, "--tls-bundle", bundle,
		"--allow-peer", "spiffe://example.org/peer",
		"--peer", "b="+b.url+",spiffe="+idB+",timeout=10s,binding=HTTP+JSON",
		"--peer", "btoken="+b.url+",spiffe="+idB+",token-file="+tokenFile+",timeout=10s,binding=HTTP+JSON")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	user := spiffeClient(ca, loadSVID(t, dir, tlsconfig.DevPeerCert, tlsconfig.DevPeerKey), idA)
	card, err := agentcard.NewResolver(user).Resolve(ctx, a.url)
	if err != nil {
		t.Fatal(err)
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(user))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()
	for _, tc := range []struct{ provider, text, caller, auth string }{
		{"peer:b", "over http json", idA, "mtls"},
		{"peer:btoken", "with a bearer token", "token:alice", "token"},
	} {
		p := textMessage(tc.text)
		p.Message.Metadata = map[string]any{"agentd/provider": tc.provider}
		res, err := client.SendMessage(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2a.Task)
		if task.Status.State != a2a.TaskStateCompleted || artifactText(task) == "" {
			t.Fatalf("%s: A's task %s %q", tc.provider, task.Status.State, artifactText(task))
		}
		// B's own record of the task A's delegation made there.
		var found bool
		for _, rec := range testkit.WithMsg(testkit.JSONLines(b.logs.String()), "task accepted") {
			if rec["spiffe_id"] == tc.caller && rec["caller_auth"] == tc.auth {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: B logged no task accepted from %s (%s):\n%s", tc.provider, tc.caller, tc.auth, b.logs.String())
		}
	}
	if n := len(testkit.WithMsg(testkit.JSONLines(a.logs.String()), "subagent started")); n != 0 {
		t.Fatalf("A ran %d subagents itself; the work was B's", n)
	}
	chosen := testkit.WithMsg(testkit.JSONLines(a.logs.String()), peer.LogInterfaceChosen)
	if len(chosen) == 0 {
		t.Fatal("A logged no peer interface choice")
	}
	for _, rec := range chosen {
		if rec["binding"] != "HTTP+JSON" || rec["version"] != "1.0" {
			t.Fatalf("A chose %v, want 1.0 over HTTP+JSON", rec)
		}
	}
}
