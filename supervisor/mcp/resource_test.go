package mcp

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/supervisor"
)

// A subagent reads an MCP server's resources through resource.read, as far as
// its scope grants them ({SERVER, resources/read}): text as it is, binary as
// base64, a resource the server does not have and a server not granted as
// error results. A child whose scope lacks the grant is refused the read, but
// a resource_ref seed slice its parent chose is read for it, with the
// parent's authority, and handed to it as the slice. Every read carries the
// reader's run_id in _meta.
func TestResourcesThroughAgentd(t *testing.T) {
	ts := newTestServer(t, "")
	h := newHarness(t, Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, fastOptions())
	h.waitRequired(10 * time.Second)
	grant, _ := h.set.Grant(nil)
	run := h.start("run-res", `[depth 0]
call resource.read {"uri":"test://greeting"}
call resource.read {"uri":"test://greeting","server":"t"}
call resource.read {"uri":"test://bin"}
call resource.read {"uri":"test://missing"}
call resource.read {"uri":"test://greeting","server":"other"}
spawn sync "narrow" scope=t/echo ref=greeting=test://greeting
spawn sync "granted" scope=t/resources/read
answer "{results}"

[path 0.1]
call resource.read {"uri":"test://greeting"}
answer "{prompt}"

[path 0.2]
call resource.read {"uri":"test://greeting"}
answer "granted done"
`, grant)
	res := h.wait(run)
	if res.Status != api.StatusCompleted {
		t.Fatalf("result %+v", res)
	}
	var reads []observed
	for _, o := range h.observed() {
		if o.Tool == api.ToolResourceRead {
			reads = append(reads, o)
		}
	}
	want := []struct {
		path  string
		isErr bool
		text  string
	}{
		{"0", false, testGreeting},
		{"0", false, testGreeting},
		{"0", false, base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 250})},
		{"0", true, "resource.read: t: the server refused the read: "},
		{"0", true, `resource.read: this subagent's scope does not grant the resources of "other"`},
		{"0.1", true, "resource.read: this subagent's scope grants the resources of no MCP server"},
		{"0.2", false, testGreeting},
	}
	if len(reads) != len(want) {
		t.Fatalf("reads seen: %+v", reads)
	}
	for i, w := range want {
		r := reads[i]
		if r.Path != w.path || r.IsError != w.isErr || !strings.HasPrefix(r.Text, w.text) {
			t.Errorf("read %d: %+v, want path %s, is_error %v, text %q", i, r, w.path, w.isErr, w.text)
		}
	}
	if got := res.Distillate.Text(); !strings.Contains(got, "[greeting] (resource test://greeting)\n"+testGreeting) {
		t.Errorf("the narrow child's first turn does not hold the seed slice read for it:\n%s", got)
	}
	seen := ts.recordedReads()
	// greeting twice, bin, the seed slice (read as its parent), 0.2's read;
	// the SDK answers the missing resource without a handler.
	if len(seen) != 5 || seen[3].Meta[api.MetaAgentPath] != "0" || seen[4].Meta[api.MetaAgentPath] != "0.2" {
		t.Errorf("the server saw %d reads: %+v", len(seen), seen)
	}
	for _, c := range seen {
		if c.Meta[MetaRunID] != "run-res" {
			t.Errorf("read of %s: _meta %v", c.Tool, c.Meta)
		}
	}
}

// ReadResource on a server that is down fails with an error naming it, after
// the call wait.
func TestReadResourceServerDown(t *testing.T) {
	ts := newTestServer(t, "")
	opts := fastOptions()
	opts.CallWait = 200 * time.Millisecond
	set, err := NewSet(Config{Servers: []ServerConfig{{Name: "t", URL: ts.url()}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	set.Start()
	defer set.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := set.WaitRequired(ctx); err != nil {
		t.Fatal(err)
	}
	srv, _ := set.Server("t")
	got, err := srv.ReadResource(ctx, supervisor.NodeInfo{RunID: "r"}, "test://greeting")
	if err != nil || len(got) != 1 || got[0].Text != testGreeting || got[0].MediaType != "text/plain" {
		t.Fatalf("read = %+v, %v", got, err)
	}
	ts.stop()
	_, err = srv.ReadResource(ctx, supervisor.NodeInfo{RunID: "r"}, "test://greeting")
	if err == nil || !strings.Contains(err.Error(), `MCP server "t"`) {
		t.Fatalf("read from a stopped server: %v", err)
	}
}
