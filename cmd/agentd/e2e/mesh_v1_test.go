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

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/tlsconfig"
)

// agentd to agentd over A2A 1.0 JSON-RPC (B's card offers 1.0 and 0.3; A
// chooses 1.0), once as A's SPIFFE ID over mTLS and once with a bearer
// token over the same mTLS: each delegation completes with B's answer, and
// B accepted each task from the caller A was configured to be.
func TestMeshOver10MutualTLSAndBearer(t *testing.T) {
	t.Parallel()
	dir, ca := devCerts(t, "example.org")
	const idA, idB = "spiffe://example.org/agentd-a", "spiffe://example.org/agentd-b"
	certA, keyA, _ := mintFiles(t, ca, dir, "agentd-a", idA)
	certB, keyB, _ := mintFiles(t, ca, dir, "agentd-b", idB)
	bundle := filepath.Join(dir, tlsconfig.DevBundle)
	tokens, token := filepath.Join(dir, "tokens"), filepath.Join(dir, "token-a")
	os.WriteFile(tokens, []byte("a-token-0123456789abcdef peer a-by-token\n"), 0o600)
	os.WriteFile(token, []byte("a-token-0123456789abcdef\n"), 0o600)

	b := startService(t, "--tls-cert", certB, "--tls-key", keyB, "--tls-bundle", bundle, "--allow-peer", idA, "--bearer-tokens-file", tokens)
	a := startService(t, "--tls-cert", certA, "--tls-key", keyA, "--tls-bundle", bundle,
		"--allow-peer", "spiffe://example.org/peer",
		"--peer", "b="+b.url+",spiffe="+idB+",timeout=10s",
		"--peer", "bt="+b.url+",spiffe="+idB+",token-file="+token+",version=1.0,binding=JSONRPC,timeout=10s")

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
	for _, peer := range []string{"b", "bt"} {
		p := textMessage("over one point oh")
		p.Message.Metadata = map[string]any{"agentd/provider": "peer:" + peer}
		res, err := client.SendMessage(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		want := `"over one point oh" has 4 words and 17 characters`
		if task := res.(*a2a.Task); task.Status.State != a2a.TaskStateCompleted || artifactText(task) != want {
			t.Fatalf("via peer:%s: %s %q, want completed %q", peer, task.Status.State, artifactText(task), want)
		}
		if got := chosen(a, peer); got != "1.0/JSONRPC" {
			t.Fatalf("A called peer:%s over %q, want 1.0/JSONRPC", peer, got)
		}
	}
	acc := testkit.WithMsg(testkit.JSONLines(b.logs.String()), a2abind.LogTaskAccepted)
	if len(acc) != 2 || str(acc[0], "spiffe_id") != idA || str(acc[0], "caller_auth") != "mtls" ||
		str(acc[1], "spiffe_id") != "token:a-by-token" || str(acc[1], "caller_auth") != "token" {
		t.Fatalf("B's tasks: %v; want one from %s over mtls, then one by the token", acc, idA)
	}
}
