package supervisor

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// fakeClock is a settable time source for the blob store. It is safe for
// concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestStore(cfg BlobConfig) (*blobStore, *fakeClock) {
	clock := newFakeClock()
	b, err := newBlobStore(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		panic(err)
	}
	b.now = clock.now
	return b, clock
}

func TestBlobStoreCaps(t *testing.T) {
	b, clock := newTestStore(BlobConfig{MaxBlobBytes: 10, MaxTotalBytes: 25, MaxCount: 3, Retention: time.Minute})
	if _, err := b.put("task", "caller", "run", "text/plain", []byte("01234567890"), false); !errors.Is(err, ErrBlobTooLarge) {
		t.Fatalf("11 bytes over a cap of 10: %v", err)
	}
	var ids []string
	for i := 0; i < 3; i++ {
		blob, err := b.put("live", "caller", "run", "text/plain", []byte("0123456"), false)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := api.ParseBlobURI(api.BlobURI(blob.ID)); !ok {
			t.Fatalf("id %q does not make a blob uri", blob.ID)
		}
		ids = append(ids, blob.ID)
		clock.advance(time.Second)
	}
	// Full on count, and every blob belongs to a running task: refused.
	if _, err := b.put("other", "caller", "run", "text/plain", []byte("x"), false); !errors.Is(err, ErrBlobStoreFull) {
		t.Fatalf("put into a store full of live blobs: %v", err)
	}
	// The task ends: its blobs may now be evicted, oldest first.
	b.release("live")
	if _, err := b.put("other", "caller", "run", "text/plain", []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.get(ids[0]); ok {
		t.Fatal("the oldest finished blob was not evicted")
	}
	if blob, ok := b.get(ids[1]); !ok || string(blob.Content) != "0123456" || blob.Owner != "live" {
		t.Fatalf("second blob: %+v %v", blob, ok)
	}
	// Over the byte total (7+7+1 held, +10 = 25 fits; +11 would not) evicts too.
	if _, err := b.put("other", "caller", "run", "text/plain", []byte("0123456789"), false); err != nil {
		t.Fatal(err)
	}
	if b.len() != 3 {
		t.Fatalf("%d blobs held, want 3", b.len())
	}
}

// A caller's blobs evict that caller's oldest finished ones first, never
// another caller's within its quota; StoreBlob's blobs are finished at once.
func TestBlobStorePerCaller(t *testing.T) {
	b, clock := newTestStore(BlobConfig{MaxBlobBytes: 10, MaxTotalBytes: 40, QuotaBytes: 20, Retention: time.Hour})
	bob, err := b.put("bob-task", "bob", "", "text/plain", []byte("0123456789"), true)
	if err != nil {
		t.Fatal(err)
	}
	var alice []string
	for range 4 {
		clock.advance(time.Second)
		blob, err := b.put("alice-task", "alice", "", "text/plain", []byte("0123456789"), true)
		if err != nil {
			t.Fatal(err)
		}
		alice = append(alice, blob.ID)
	}
	if _, ok := b.get(bob.ID); !ok {
		t.Fatal("bob's blob went to alice's")
	}
	if _, ok := b.get(alice[1]); ok {
		t.Fatal("alice holds more than her 20-byte quota")
	}
	if _, ok := b.get(alice[3]); !ok {
		t.Fatal("alice's newest blob is gone")
	}
	// A caller whose quota holds only a running task's blobs is refused.
	b.put("carol-task", "carol", "run", "text/plain", []byte("0123456789"), false)
	b.put("carol-task", "carol", "run", "text/plain", []byte("0123456789"), false)
	if _, err := b.put("carol-task", "carol", "run", "text/plain", []byte("x"), false); !errors.Is(err, ErrBlobStoreFull) {
		t.Fatalf("carol over her quota: %v", err)
	}
}

func TestBlobStoreRetention(t *testing.T) {
	b, clock := newTestStore(BlobConfig{Retention: time.Minute})
	blob, err := b.put("task", "caller", "run", "text/plain", []byte("kept"), false)
	if err != nil {
		t.Fatal(err)
	}
	clock.advance(24 * time.Hour)
	if _, ok := b.get(blob.ID); !ok {
		t.Fatal("a running task's blob expired")
	}
	b.release("task")
	clock.advance(59 * time.Second)
	if _, ok := b.get(blob.ID); !ok {
		t.Fatal("gone inside the retention window")
	}
	clock.advance(time.Second)
	if _, ok := b.get(blob.ID); ok {
		t.Fatal("readable after the retention window")
	}
	if n, bytes := b.usage(); b.len() != 0 || n != 0 || bytes != 0 {
		t.Fatalf("expired blob still held: %d blobs, %d bytes", n, bytes)
	}
	if _, ok := b.get("no-such-id"); ok {
		t.Fatal("an unknown id was found")
	}
}

// TestBlobPutOverControlChannel: a child stores a blob with blob/put; the
// supervisor keeps it for the task, serves it by id, and drops it after the
// retention window once the task has ended.
func TestBlobPutOverControlChannel(t *testing.T) {
	s, _ := newSupervisor(t, "blob-put", func(c *Config) {
		c.Blobs = BlobConfig{MaxBlobBytes: 1000, Retention: time.Minute}
	})
	clock := newFakeClock()
	s.blobs.now = clock.now
	r := start(t, s, testPayload("abc", time.Minute))
	res := result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Reference == nil {
		t.Fatalf("result = %+v", res)
	}
	id, ok := api.ParseBlobURI(res.Distillate.Reference.URI)
	if !ok {
		t.Fatalf("uri %q", res.Distillate.Reference.URI)
	}
	blob, ok := s.Blob(id)
	if !ok || string(blob.Content) != strings.Repeat("abc", 100) || blob.MediaType != "text/plain" || blob.Owner != r.Handle() || blob.RunID != "run-test" {
		t.Fatalf("blob = %+v, %v", blob, ok)
	}
	content, mediaType, owner, ok := s.ReadBlob(id)
	if !ok || len(content) != 300 || mediaType != "text/plain" || owner != r.Handle() {
		t.Fatalf("ReadBlob = %d bytes, %q, owner %q, %v", len(content), mediaType, owner, ok)
	}
	clock.advance(time.Minute)
	if _, ok := s.Blob(id); ok {
		t.Fatal("the blob outlived its retention window after the task ended")
	}

	// 400 bytes against a cap of 300: refused, and the child says so.
	s2, _ := newSupervisor(t, "blob-put", func(c *Config) { c.Blobs = BlobConfig{MaxBlobBytes: 300} })
	r = start(t, s2, testPayload("abcd", time.Minute))
	res = result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Reference != nil || !strings.Contains(res.Detail, "size cap") {
		t.Fatalf("oversized blob: %+v", res)
	}
}

// unreleased returns the ids of the blobs of the tree rooted at owner whose
// retention window has not started: blobs the store keeps as a running task's.
func unreleased(b *blobStore, owner string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for id, e := range b.blobs {
		if _, finished := b.led.Finished(id); e.Owner == owner && !finished {
			out = append(out, id)
		}
	}
	return out
}

// Regression: the retention window of a task's blobs started when its root
// ended, so a blob a detached descendant stored later was kept as a running
// task's forever (never expired, never evicted). It starts when the last node
// of the tree has ended.
func TestBlobOfDetachedChildIsReleased(t *testing.T) {
	s, rec := newNestingSupervisor(t)
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
	if n := s.blobs.len(); n != 1 {
		t.Fatalf("%d blobs held, want the detached child's one", n)
	}
	if ids := unreleased(s.blobs, r.Handle()); len(ids) != 0 {
		t.Fatalf("blobs %v of an ended tree are held as a running task's", ids)
	}
}
