package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	spiffetls "github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"

	"github.com/agentd/agentd/a2a/a2agrpc"
	"github.com/agentd/agentd/a2a/peer"
	"github.com/agentd/agentd/tlsconfig"
)

// grpcInterface reads the GRPC entry of the 1.0 supportedInterfaces of the
// card at base, fetched with hc.
func grpcInterface(t *testing.T, hc *http.Client, base string) string {
	t.Helper()
	resp, err := hc.Get(strings.TrimSuffix(base, "/") + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var card struct {
		SupportedInterfaces []struct{ URL, ProtocolBinding, ProtocolVersion string } `json:"supportedInterfaces"`
	}
	if err := json.Unmarshal(b, &card); err != nil {
		t.Fatalf("card: %v\n%s", err, b)
	}
	for _, in := range card.SupportedInterfaces {
		if in.ProtocolBinding == a2agrpc.Binding && in.ProtocolVersion == "1.0" {
			return in.URL
		}
	}
	t.Fatalf("the card lists no GRPC 1.0 interface: %s", b)
	return ""
}

// agentd to agentd over the A2A 1.0 gRPC binding, on B's one TLS listener:
// A's identity (its SVID, through the http.Client the peer provider builds
// for B, which a2agrpc.NewFromHTTP takes apart) and a bearer token each
// reach B over gRPC; B records each caller; a stream runs to completion.
// B's card lists the gRPC interface as host:port of its listener. A plain
// agentd on loopback serves the same binding over h2c. (The peer provider's
// choice of binding is another change's; this drives the client a peer
// would be called with.)
func TestGRPCAgentdToAgentd(t *testing.T) {
	t.Parallel()
	dir, ca := devCerts(t, "example.org")
	const idA, idB = "spiffe://example.org/agentd-a", "spiffe://example.org/agentd-b"
	certA, keyA, _ := mintFiles(t, ca, dir, "agentd-a", idA)
	certB, keyB, _ := mintFiles(t, ca, dir, "agentd-b", idB)
	bundle := filepath.Join(dir, tlsconfig.DevBundle)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("grpc-token-0123456789 peer ci\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startService(t, "--tls-cert", certB, "--tls-key", keyB, "--tls-bundle", bundle, "--allow-peer", idA, "--bearer-tokens-file", tokens)

	srcA, err := tlsconfig.NewFileSource(tlsconfig.Files{Cert: certA, Key: keyA, Bundle: bundle}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := peer.Clients(srcA)(peer.Config{Name: "b", URL: b.url, SPIFFEID: idB, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	target := grpcInterface(t, hc, b.url)
	if want := strings.TrimSuffix(strings.TrimPrefix(b.url, "https://"), "/"); target != want {
		t.Fatalf("the card's gRPC interface %q, want the listener %q", target, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	asA, err := a2agrpc.NewFromHTTP(target, hc, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer asA.Close()
	res, err := asA.SendMessage(ctx, textMessage("over grpc mtls"))
	if err != nil {
		t.Fatalf("SendMessage over gRPC with A's SVID: %v", err)
	}
	task := res.(*a2a.Task)
	want := `"over grpc mtls" has 3 words and 14 characters`
	if task.Status.State != a2a.TaskStateCompleted || artifactText(task) != want {
		t.Fatalf("B's task: %s %q, want completed %q", task.Status.State, artifactText(task), want)
	}
	got, err := asA.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil || got.Metadata["agentd/caller"] != idA || got.Metadata["agentd/caller_auth"] != "mtls" {
		t.Fatalf("GetTask: %v, metadata %v: want caller %s over mtls", err, got.Metadata, idA)
	}

	// A bearer token over the same TLS listener, no client certificate.
	tc := tlsconfig.ClientConfig(nil, ca.Bundle(), spiffetls.AuthorizeID(spiffeid.RequireFromString(idB)))
	withToken, err := a2agrpc.New(target, a2agrpc.Options{TLS: tc, Token: func() (string, error) { return "grpc-token-0123456789", nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer withToken.Close()
	var last a2a.Event
	for ev, err := range withToken.SendStreamingMessage(ctx, textMessage("streamed with a token")) {
		if err != nil {
			t.Fatalf("SendStreamingMessage with a bearer token: %v", err)
		}
		last = ev
	}
	u, ok := last.(*a2a.TaskStatusUpdateEvent)
	if !ok || u.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the stream's last event %#v, want completed", last)
	}
	got, err = withToken.GetTask(ctx, &a2a.TaskQueryParams{ID: u.TaskID})
	if err != nil || got.Metadata["agentd/caller"] != "token:ci" || got.Metadata["agentd/caller_auth"] != "token" {
		t.Fatalf("GetTask: %v, metadata %v: want caller token:ci", err, got.Metadata)
	}
	// Neither sees the other's task.
	if _, err := withToken.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err == nil {
		t.Fatal("the token's caller read A's task")
	}

	// Plain agentd on loopback: the same binding over h2c.
	plain := startService(t)
	c, err := a2agrpc.New(plain.url, a2agrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res, err := c.SendMessage(ctx, textMessage("over h2c")); err != nil || res.(*a2a.Task).Status.State != a2a.TaskStateCompleted {
		t.Fatalf("SendMessage over h2c on loopback: %v %v", res, err)
	}
}
