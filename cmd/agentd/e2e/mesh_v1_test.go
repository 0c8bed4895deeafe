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

// A rerun of a routed message after agentd lost it (a SIGKILL, --recover
// rerun) sends the peer the same messageId as the first attempt: the peer,
// an agentd that keeps messageIds, answers with the task it already has, so
// the work runs there once and the rerun completes with its answer.
func TestRerunDoesNotRunThePeersWorkTwice(t *testing.T) {
	t.Parallel()
	b := startService(t, "--intelligence", "builtin:script="+writeScript(t, "[default]\nsleep 1500ms\nanswer \"b did {objective}\"\n"))
	args := []string{"--state-dir", t.TempDir(), "--recover", "rerun", "--peer", "b=" + b.url, "--route", "*=peer:b"}
	a := startService(t, args...)
	res, err := a.client(t).SendMessage(context.Background(), nonBlocking(textMessage("the job")))
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	testkit.WaitFor(t, 20*time.Second, "B working on the delegation", func() bool { return lineCount(b, "subagent started") >= 1 })
	a.kill(t)

	a2 := startService(t, args...)
	if n := lineCount(a2, "rerunning task"); n != 1 {
		t.Fatalf("%d reruns logged, want 1", n)
	}
	var got *a2a.Task
	testkit.WaitFor(t, 20*time.Second, "the rerun task ended", func() bool {
		got = getTask(t, a2, id)
		return got.Status.State.Terminal()
	})
	if got.Status.State != a2a.TaskStateCompleted || artifactText(got) != "b did the job" || got.Metadata["agentd/attempt"] != 2.0 {
		t.Fatalf("the rerun task: %s %q %v", got.Status.State, artifactText(got), got.Metadata)
	}
	if n, runs := taskCount(t, b), lineCount(b, "subagent started"); n != 1 || runs != 1 {
		t.Fatalf("B holds %d tasks and ran %d roots; want 1 and 1 (the rerun's message is the first's)", n, runs)
	}
}
