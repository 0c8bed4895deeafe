package supervisor

import (
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
	"github.com/agentd/agentd/supervisor/blob"
)

// TestBlobPutOverControlChannel: a child stores a blob with blob/put; the
// supervisor keeps it for the task, serves it by id, and drops it after the
// retention window once the task has ended.
func TestBlobPutOverControlChannel(t *testing.T) {
	clock := testkit.NewClock()
	s, _ := newSupervisor(t, "blob-put", func(c *Config) {
		c.Blobs = blob.Config{MaxBlobBytes: 1000, Retention: time.Minute, Now: clock.Now}
	})
	r := start(t, s, testPayload("abc", time.Minute))
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Reference == nil {
		t.Fatalf("result = %+v", res)
	}
	id, ok := api.ParseBlobURI(res.Distillate.Reference.URI)
	if !ok {
		t.Fatalf("uri %q", res.Distillate.Reference.URI)
	}
	b, ok := s.Blob(id)
	if !ok || string(b.Content) != strings.Repeat("abc", 100) || b.MediaType != "text/plain" || b.Owner != r.Handle() || b.RunID != "run-test" {
		t.Fatalf("blob = %+v, %v", b, ok)
	}
	content, mediaType, owner, ok := s.ReadBlob(id)
	if !ok || len(content) != 300 || mediaType != "text/plain" || owner != r.Handle() {
		t.Fatalf("ReadBlob = %d bytes, %q, owner %q, %v", len(content), mediaType, owner, ok)
	}
	clock.Advance(time.Minute)
	if _, ok := s.Blob(id); ok {
		t.Fatal("the blob outlived its retention window after the task ended")
	}

	// 400 bytes against a cap of 300: refused, and the child says so.
	s2, _ := newSupervisor(t, "blob-put", func(c *Config) { c.Blobs = blob.Config{MaxBlobBytes: 300} })
	r = start(t, s2, testPayload("abcd", time.Minute))
	res = result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Reference != nil || !strings.Contains(res.Detail, "size cap") {
		t.Fatalf("oversized blob: %+v", res)
	}
}

// Regression: the retention window of a task's blobs started when its root
// ended, so a blob a detached descendant stored later was kept as a running
// task's forever (never expired, never evicted). It starts when the last node
// of the tree has ended: once the retention window has passed, the blob is
// gone.
func TestBlobOfDetachedChildIsReleased(t *testing.T) {
	clock := testkit.NewClock()
	s, rec := newNestingSupervisor(t, func(c *Config) { c.Blobs = blob.Config{Retention: time.Minute, Now: clock.Now} })
	g := newGate(t)
	r := start(t, s, testPayload(prog{Calls: []progCall{
		spawnCall(prog{WaitFile: string(g), Blob: "late bulk", Answer: "stored"}, api.DispositionDetach),
	}}.objective(), time.Minute))
	if res := result(t, r, 10*time.Second); res.Status != api.StatusCompleted {
		t.Fatalf("root: %+v", res)
	}
	g.open(t) // the root has ended: now the detached child stores its blob
	select {
	case <-r.TreeDone():
	case <-time.After(10 * time.Second):
		t.Fatal("tree did not end")
	}
	if f, ok := rec.byPath("0.1"); !ok || f.res.Status != api.StatusCompleted {
		t.Fatalf("detached child: %+v", f.res)
	}
	if n, _ := s.BlobUsage(); n != 1 {
		t.Fatalf("%d blobs held, want the detached child's one", n)
	}
	clock.Advance(time.Minute)
	s.Blob("") // drops the blobs past their retention window
	if n, _ := s.BlobUsage(); n != 0 {
		t.Fatalf("%d blobs of an ended tree held past the retention window: held as a running task's", n)
	}
}
