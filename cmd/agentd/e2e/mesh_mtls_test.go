package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/tlsconfig"
)

// mintFiles mints an SVID for id with ca and writes it into dir as
// NAME.pem and NAME-key.pem; it returns the two paths and the SVID.
func mintFiles(t *testing.T, ca *tlsconfig.DevCA, dir, name, id string) (cert, key string, svid *x509svid.SVID) {
	t.Helper()
	s, err := ca.MintX509SVID(spiffeid.RequireFromString(id), tlsconfig.SVIDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := tlsconfig.WriteSVID(s, cert, key); err != nil {
		t.Fatal(err)
	}
	return cert, key, s
}

// Two agentd processes with dev-CA SVIDs: A delegates to B over mTLS (A
// presents its own SVID and checks B's SPIFFE ID), B records A as the
// task's caller, and B's result comes back as A's artifact. A peer
// configured with an ID the server does not present is refused in the
// handshake, before anything is sent.
func TestMeshMutualTLSDelegation(t *testing.T) {
	t.Parallel()
	dir, ca := devCerts(t, "example.org")
	const idA, idB = "spiffe://example.org/agentd-a", "spiffe://example.org/agentd-b"
	certA, keyA, svidA := mintFiles(t, ca, dir, "agentd-a", idA)
	certB, keyB, _ := mintFiles(t, ca, dir, "agentd-b", idB)
	bundle := filepath.Join(dir, tlsconfig.DevBundle)

	b := startService(t, "--tls-cert", certB, "--tls-key", keyB, "--tls-bundle", bundle, "--allow-peer", idA)
	a := startService(t, "--tls-cert", certA, "--tls-key", keyA, "--tls-bundle", bundle,
		"--allow-peer", "spiffe://example.org/peer",
		"--peer", "b="+b.url+",spiffe="+idB+",timeout=10s",
		"--peer", "impostor="+b.url+",spiffe=spiffe://example.org/agentd-c,timeout=10s")

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
	send := func(text, provider string) *a2a.Task {
		p := textMessage(text)
		p.Message.Metadata = map[string]any{"agentd/provider": provider}
		res, err := client.SendMessage(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return res.(*a2a.Task)
	}

	task := send("over mutual tls", "peer:b")
	want := `"over mutual tls" has 3 words and 15 characters`
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != want {
		t.Fatalf("A's task: %s %q, want completed %q", task.Status.State, artifactText(task), want)
	}
	if usage, _ := task.Metadata["agentd/usage"].(map[string]any); usage == nil || usage["tokens_out"].(float64) <= 0 {
		t.Fatalf("B's usage did not come back: %v", task.Metadata)
	}
	if n := len(testkit.WithMsg(testkit.JSONLines(a.logs.String()), "subagent started")); n != 0 {
		t.Fatalf("A ran %d subagents itself; the work was B's", n)
	}

	// B's side: the task was created by A's SPIFFE ID over mTLS.
	asA := spiffeClient(ca, svidA, idB)
	listB := func() []map[string]any {
		r, err := callRPC(t, asA, b.url, "ListTasks", map[string]any{}, map[string]string{"A2A-Version": "1.0"})
		if err != nil || r.Error != nil {
			t.Fatalf("ListTasks on B as A: %v %+v %s", err, r.Error, r.body)
		}
		var page struct {
			Tasks []map[string]any `json:"tasks"`
		}
		if err := json.Unmarshal(r.Result, &page); err != nil {
			t.Fatal(err)
		}
		return page.Tasks
	}
	tasks := listB()
	if len(tasks) != 1 {
		t.Fatalf("B holds %d tasks of A's, want 1", len(tasks))
	}
	meta, _ := tasks[0]["metadata"].(map[string]any)
	if meta["agentd/caller"] != idA || meta["agentd/caller_auth"] != "mtls" {
		t.Fatalf("B's task metadata %v: want caller %s over mtls", meta, idA)
	}

	// The impostor entry points at B but expects another ID: refused.
	task = send("never delivered", "peer:impostor")
	if task.Status.State.Terminal() && task.Status.State == a2a.TaskStateCompleted {
		t.Fatalf("delegation to a server with the wrong SPIFFE ID completed: %q", artifactText(task))
	}
	msg := ""
	if task.Status.Message != nil {
		for _, p := range task.Status.Message.Parts {
			if tp, ok := p.(a2a.TextPart); ok {
				msg += tp.Text
			}
		}
	}
	if task.Status.State != a2a.TaskStateFailed || !strings.Contains(msg, idB) {
		t.Fatalf("impostor: %s %q; want failed naming the ID the server presented (%s)", task.Status.State, msg, idB)
	}
	if n := len(listB()); n != 1 {
		t.Fatalf("B holds %d tasks of A's after the refused delegation, want still 1", n)
	}
}
