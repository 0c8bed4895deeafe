package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/agentd/agentd/a2a/a2abind"
	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/tlsconfig"
)

// meshBindings are the transports agentd calls an agentd peer over, as a
// --peer pins them, and the name A logs for each.
var meshBindings = []struct{ name, pin, chosen string }{
	{"jsonrpc10", "version=1.0,binding=JSONRPC", "1.0/JSONRPC"},
	{"jsonrpc03", "version=0.3,binding=JSONRPC", "0.3/JSONRPC"},
	{"httpjson", "binding=HTTP+JSON", "1.0/HTTP+JSON"},
	{"grpc", "binding=GRPC", "1.0/GRPC"},
}

// agentd to agentd over each binding it calls (JSON-RPC 1.0 and 0.3,
// HTTP+JSON, gRPC), each with A's SPIFFE SVID over mTLS and with a bearer
// token: a routed message comes back with B's answer and B records the
// caller A was configured to be. Then one streamed message makes A's model
// spawn a child on B over each binding; B's scripted model streams its
// answer a word at a time, and A's streaming client sees each child's text
// as artifact updates of the child (api.MetaStreamTask) before the child's
// last chunk: B's text streams through A's tree, and each child's result
// is B's answer.
func TestMeshOverEachBinding(t *testing.T) {
	t.Parallel()
	dir, ca := devCerts(t, "example.org")
	const idA, idB = "spiffe://example.org/agentd-a", "spiffe://example.org/agentd-b"
	certA, keyA, _ := mintFiles(t, ca, dir, "agentd-a", idA)
	certB, keyB, _ := mintFiles(t, ca, dir, "agentd-b", idB)
	bundle := filepath.Join(dir, tlsconfig.DevBundle)
	const token = "bindings-token-7f3a91c2d4"
	tokens, tokenFile := filepath.Join(dir, "tokens"), filepath.Join(dir, "token")
	if err := os.WriteFile(tokens, []byte(token+" peer by-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startService(t, "--tls-cert", certB, "--tls-key", keyB, "--tls-bundle", bundle, "--allow-peer", idA, "--bearer-tokens-file", tokens,
		"--intelligence", "builtin:script="+writeScript(t, "[default]\nstream 5ms\nanswer \"b streams {objective} word by word\"\n"))

	script := "[depth 0]\n"
	args := []string{"--tls-cert", certA, "--tls-key", keyA, "--tls-bundle", bundle, "--allow-peer", "spiffe://example.org/peer"}
	for _, mb := range meshBindings {
		args = append(args,
			"--peer", "b-"+mb.name+"="+b.url+",spiffe="+idB+",timeout=10s,"+mb.pin,
			"--peer", "t-"+mb.name+"="+b.url+",spiffe="+idB+",token-file="+tokenFile+",timeout=10s,"+mb.pin)
		script += "spawn sync \"via " + mb.name + "\" provider=peer:b-" + mb.name + "\n"
	}
	script += "answer \"{results}\"\n"
	a := startService(t, append(args, "--intelligence", "builtin:script="+writeScript(t, script))...)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
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

	for _, mb := range meshBindings {
		for _, c := range []struct{ peer, caller, auth string }{
			{"b-" + mb.name, idA, "mtls"},
			{"t-" + mb.name, "token:by-token", "token"},
		} {
			objective := "routed over " + mb.name + " " + c.auth
			p := textMessage(objective)
			p.Message.Metadata = map[string]any{"agentd/provider": "peer:" + c.peer}
			res, err := client.SendMessage(ctx, p)
			if err != nil {
				t.Fatalf("peer:%s: %v", c.peer, err)
			}
			want := "b streams " + objective + " word by word"
			if task := res.(*a2a.Task); task.Status.State != a2a.TaskStateCompleted || artifactText(task) != want {
				t.Fatalf("via peer:%s: %s %q (%+v), want completed %q", c.peer, task.Status.State, artifactText(task), task.Status.Message, want)
			}
			if got := chosen(a, c.peer); got != mb.chosen {
				t.Fatalf("A called peer:%s over %q, want %s", c.peer, got, mb.chosen)
			}
			acc := testkit.WithMsg(testkit.JSONLines(b.logs.String()), a2abind.LogTaskAccepted)
			if !slices.ContainsFunc(acc, func(r map[string]any) bool {
				return str(r, "spiffe_id") == c.caller && str(r, "caller_auth") == c.auth
			}) {
				t.Fatalf("peer:%s: B accepted no task from %s over %s: %v", c.peer, c.caller, c.auth, acc)
			}
		}
	}

	// A message routed to B over each binding, streamed: B's text reaches
	// A's caller as it comes, as A's own root's would (the remote task's
	// artifact updates shown as this task's distillate growing), then the
	// whole result.
	for _, mb := range meshBindings {
		p := textMessage("streamed over " + mb.name)
		p.Message.Metadata = map[string]any{"agentd/provider": "peer:b-" + mb.name}
		var got []string
		appended, ended := 0, false
		for ev, err := range client.SendStreamingMessage(ctx, p) {
			if err != nil {
				t.Fatal(err)
			}
			switch v := ev.(type) {
			case *a2a.TaskArtifactUpdateEvent:
				if ended {
					t.Errorf("routed over %s: an artifact update after the final status", mb.name)
				}
				if v.Append {
					appended++
				}
				for _, part := range v.Artifact.Parts {
					if tp, ok := part.(a2a.TextPart); ok {
						got = append(got, tp.Text)
					}
				}
			case *a2a.TaskStatusUpdateEvent:
				ended = ended || v.Status.State.Terminal()
			}
		}
		want := "b streams streamed over " + mb.name + " word by word"
		if strings.Join(got, "") != want || appended < 2 {
			t.Errorf("routed over %s: streamed %q (%d appended), want %q a word at a time", mb.name, got, appended, want)
		}
	}

	// Spawns on B over each binding, streamed.
	pieces := map[string][]string{} // by the child's agent path
	lastChunk := map[string]bool{}  // the child's last chunk (the child ended) came
	var final *a2a.TaskStatusUpdateEvent
	for ev, err := range client.SendStreamingMessage(ctx, textMessage("spawn on every binding")) {
		if err != nil {
			t.Fatal(err)
		}
		switch v := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			if v.Metadata[api.MetaStreamTask] == nil {
				continue // the root's own
			}
			path, _ := v.Metadata[api.MetaAgentPath].(string)
			if lastChunk[path] {
				t.Errorf("child %s: an update after its last chunk", path)
			}
			for _, p := range v.Artifact.Parts {
				if tp, ok := p.(a2a.TextPart); ok && tp.Text != "" {
					pieces[path] = append(pieces[path], tp.Text)
				}
			}
			lastChunk[path] = v.LastChunk
		case *a2a.TaskStatusUpdateEvent:
			if v.Status.State.Terminal() {
				final = v
			}
		}
	}
	if final == nil || final.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the spawning task ended %+v", final)
	}
	for i, mb := range meshBindings {
		path := "0." + string(rune('1'+i))
		want := "b streams via " + mb.name + " word by word"
		if got := strings.Join(pieces[path], ""); len(pieces[path]) < 2 || got != want || !lastChunk[path] {
			t.Errorf("child %s (over %s): streamed %q (last chunk %v), want %q a word at a time, then its last chunk", path, mb.name, pieces[path], lastChunk[path], want)
		}
		if got := chosen(a, "b-"+mb.name); got != mb.chosen {
			t.Errorf("A called peer:b-%s over %q, want %s", mb.name, got, mb.chosen)
		}
	}
}
