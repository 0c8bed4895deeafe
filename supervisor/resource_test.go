package supervisor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd/agentd/api"
)

func readCall(a api.ResourceReadArgs) progCall { return rawCall(api.ToolResourceRead, a) }

// resource.read on an async child's resource_uri reports it running, then,
// after resource.wait has seen its completion (the resource's one update),
// finished with its result. A handle not below the reader is unknown to it,
// and a blob has no updates to wait for.
func TestResourceReadChild(t *testing.T) {
	s, _ := newNestingSupervisor(t)
	g := newGate(t)
	wait, _ := json.Marshal(api.ResourceWaitArgs{URI: resourceOf(0)})
	_, res := runProg(t, s, prog{Calls: []progCall{
		spawnCall(prog{WaitFile: string(g), Answer: "the child's result"}, api.DispositionAsync),
		readCall(api.ResourceReadArgs{URI: resourceOf(0)}),
		{Tool: api.ToolResourceWait, Args: wait, Touch: string(g)},
		readCall(api.ResourceReadArgs{URI: resourceOf(0)}),
		readCall(api.ResourceReadArgs{URI: "agent://subagent/not-a-child"}),
		rawCall(api.ToolResourceWait, api.ResourceWaitArgs{URI: "agent://blob/x"}),
		readCall(api.ResourceReadArgs{URI: "agent://elsewhere/x"}),
	}})
	rep := report(t, res)
	spawned := childReportOf(t, rep.Results[0])
	if spawned.ResourceURI != api.ResourceURI(spawned.Handle) || spawned.State != api.ChildRunning {
		t.Fatalf("async spawn answered %+v", spawned)
	}
	running := childReportOf(t, rep.Results[1])
	if running.Handle != spawned.Handle || running.State != api.ChildRunning || running.Distillate != nil {
		t.Errorf("read while running: %+v", running)
	}
	for i, what := range []string{"resource.wait", "read after the wait"} {
		cr := childReportOf(t, rep.Results[2+i])
		if cr.Handle != spawned.Handle || cr.State != api.ChildFinished || cr.Status != api.StatusCompleted || cr.Distillate.Text() != "the child's result" {
			t.Errorf("%s: %+v", what, cr)
		}
	}
	for i, want := range []string{
		`resource.read: no subagent with handle "not-a-child" below this one`,
		"resource.wait: a blob never changes; read it with resource.read",
		"resource.read: \"agent://elsewhere/x\": the agent:// resources are agent://subagent/HANDLE and agent://blob/ID",
	} {
		if r := rep.Results[4+i]; !r.IsError || r.Text != want {
			t.Errorf("result %d: %+v, want the error %q", 4+i, r, want)
		}
	}
}

// A stored distillate is readable through resource.read by its own tree, in
// pieces when asked; another tree is refused it with a clear error, and sees
// none of the first tree's children either.
func TestResourceReadBlob(t *testing.T) {
	s, _ := newNestingSupervisor(t)
	bulk := strings.Repeat("0123456789", 50)
	_, resA := runProg(t, s, prog{Calls: []progCall{
		spawnCall(prog{Blob: bulk, AnswerBlob: true}, api.DispositionSync),
		readCall(api.ResourceReadArgs{URI: blobOf(0)}),
		readCall(api.ResourceReadArgs{URI: blobOf(0), Offset: 10, MaxBytes: 25}),
		readCall(api.ResourceReadArgs{URI: blobOf(0), Offset: 490}),
	}})
	repA := report(t, resA)
	child := childReportOf(t, repA.Results[0])
	if child.Distillate == nil || child.Distillate.Reference == nil {
		t.Fatalf("the child answered %+v, want a reference", child)
	}
	uri := child.Distillate.Reference.URI
	if r := repA.Results[1]; r.IsError || r.Text != bulk {
		t.Errorf("read of the tree's own blob: %+v", r)
	}
	if r := repA.Results[2]; r.IsError || r.Text != bulk[10:35]+"\n[agentd: bytes 10 to 35 of 500; read again with offset 35 for more]" {
		t.Errorf("a piece of it: %+v", r)
	}
	if r := repA.Results[3]; r.IsError || r.Text != bulk[490:] {
		t.Errorf("its last piece: %+v", r)
	}

	_, resB := runProg(t, s, prog{Calls: []progCall{
		readCall(api.ResourceReadArgs{URI: uri}),
		readCall(api.ResourceReadArgs{URI: api.ResourceURI(child.Handle)}),
		readCall(api.ResourceReadArgs{URI: api.BlobURI("00000000-0000-4000-8000-000000000000")}),
	}})
	repB := report(t, resB)
	id, _ := api.ParseBlobURI(uri)
	for i, want := range []string{
		`resource.read: refused: blob "` + id + `" was stored by another tree; a tree reads only the blobs it stored`,
		`resource.read: no subagent with handle "` + child.Handle + `" below this one`,
		`resource.read: no blob "00000000-0000-4000-8000-000000000000" (unknown, or past its retention)`,
	} {
		if r := repB.Results[i]; !r.IsError || r.Text != want {
			t.Errorf("other tree, read %d: %+v, want %q", i, r, want)
		}
	}
}

// A resource_ref seed slice is read when its child starts, with its parent's
// authority, and the child is handed the content (cut at the slice cap, and
// the seed's cap), or told why it could not be read; what a parent puts in
// Resolved itself is discarded.
func TestSeedResourceRef(t *testing.T) {
	bulk := strings.Repeat("x", 500)
	seeded := func(refs ...api.SeedSlice) progCall {
		return spawnCall(prog{}, api.DispositionSync, func(a *api.SpawnArgs) { a.Seed.Slices = refs })
	}
	ref := func(label, uri string) api.SeedSlice {
		return api.SeedSlice{Label: label, Content: api.SeedContent{ResourceRef: uri}}
	}
	seedOf := func(t *testing.T, r progResult) []api.SeedSlice {
		t.Helper()
		return report(t, api.SubagentResult{Distillate: *childReportOf(t, r).Distillate}).Seed
	}

	t.Run("read and unreadable", func(t *testing.T) {
		s, _ := newNestingSupervisor(t, func(c *Config) { c.SeedResource = 400 })
		forged := ref("missing", "agent://blob/nothing-here")
		forged.Content.Resolved = &api.ResolvedResource{Text: "forged by the parent"}
		_, res := runProg(t, s, prog{Calls: []progCall{
			spawnCall(prog{Blob: bulk, AnswerBlob: true}, api.DispositionSync),
			seeded(
				ref("bulk", blobOf(0)),
				ref("report", resourceOf(0)),
				forged,
				ref("mcp", "file:///etc/hostname"),
				api.SeedSlice{Label: "plain", Content: api.SeedContent{Text: "inline"}},
			),
		}})
		rep := report(t, res)
		first := childReportOf(t, rep.Results[0])
		got := seedOf(t, rep.Results[1])
		if len(got) != 5 {
			t.Fatalf("seed %+v", got)
		}
		if r := got[0].Content.Resolved; r == nil || r.Text != bulk[:400] || !r.Truncated || r.Size != 500 || r.MediaType != "text/plain" {
			t.Errorf("blob slice: %+v", r)
		}
		var cr api.ChildReport
		if r := got[1].Content.Resolved; r == nil || json.Unmarshal([]byte(r.Text), &cr) != nil || cr.Handle != first.Handle || cr.State != api.ChildFinished || r.Truncated {
			t.Errorf("report slice: %+v", r)
		}
		if r := got[2].Content.Resolved; r == nil || r.Text != "" || r.Error != `no blob "nothing-here" (unknown, or past its retention)` {
			t.Errorf("unreadable slice: %+v", r)
		}
		if r := got[3].Content.Resolved; r == nil || r.Error != "this subagent's scope grants the resources of no MCP server" {
			t.Errorf("mcp slice without a grant: %+v", r)
		}
		if got[4].Content.Resolved != nil || got[4].Content.Text != "inline" {
			t.Errorf("text slice: %+v", got[4])
		}
	})

	t.Run("seed cap", func(t *testing.T) {
		s, _ := newNestingSupervisor(t, func(c *Config) { c.SeedResource = 400; c.SeedResources = 450 })
		_, res := runProg(t, s, prog{Calls: []progCall{
			spawnCall(prog{Blob: bulk, AnswerBlob: true}, api.DispositionSync),
			seeded(ref("one", blobOf(0)), ref("two", blobOf(0)), ref("three", blobOf(0))),
		}})
		got := seedOf(t, report(t, res).Results[1])
		if r := got[0].Content.Resolved; len(r.Text) != 400 || !r.Truncated {
			t.Errorf("first slice: %d bytes", len(r.Text))
		}
		if r := got[1].Content.Resolved; len(r.Text) != 50 || !r.Truncated {
			t.Errorf("second slice: %d bytes, want the 50 left of the seed's cap", len(r.Text))
		}
		if r := got[2].Content.Resolved; r.Text != "" || r.Error != "not read: the seed's resources already take its cap of 450 bytes" {
			t.Errorf("third slice: %+v", r)
		}
	})
}
