package supervisor

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
)

// fakeClock is a settable time source for the blob store.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestStore(cfg BlobConfig) (*blobStore, *fakeClock) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	b := newBlobStore(cfg)
	b.now = clock.now
	return b, clock
}

func TestBlobStoreCaps(t *testing.T) {
	b, clock := newTestStore(BlobConfig{MaxBlobBytes: 10, MaxTotalBytes: 25, MaxCount: 3, Retention: time.Minute})
	if _, err := b.put("task", "run", "text/plain", []byte("01234567890")); !errors.Is(err, ErrBlobTooLarge) {
		t.Fatalf("11 bytes over a cap of 10: %v", err)
	}
	var ids []string
	for i := 0; i < 3; i++ {
		blob, err := b.put("live", "run", "text/plain", []byte("0123456"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := api.ParseBlobURI(api.BlobURI(blob.ID)); !ok {
			t.Fatalf("id %q does not make a blob uri", blob.ID)
		}
		ids = append(ids, blob.ID)
		clock.t = clock.t.Add(time.Second)
	}
	// Full on count, and every blob belongs to a running task: refused.
	if _, err := b.put("other", "run", "text/plain", []byte("x")); !errors.Is(err, ErrBlobStoreFull) {
		t.Fatalf("put into a store full of live blobs: %v", err)
	}
	// The task ends: its blobs may now be evicted, oldest first.
	b.release("live")
	if _, err := b.put("other", "run", "text/plain", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.get(ids[0]); ok {
		t.Fatal("the oldest finished blob was not evicted")
	}
	if blob, ok := b.get(ids[1]); !ok || string(blob.Content) != "0123456" || blob.Owner != "live" {
		t.Fatalf("second blob: %+v %v", blob, ok)
	}
	// Over the byte total (7+7+1 held, +10 = 25 fits; +11 would not) evicts too.
	if _, err := b.put("other", "run", "text/plain", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if b.len() != 3 {
		t.Fatalf("%d blobs held, want 3", b.len())
	}
}

func TestBlobStoreRetention(t *testing.T) {
	b, clock := newTestStore(BlobConfig{Retention: time.Minute})
	blob, err := b.put("task", "run", "text/plain", []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(24 * time.Hour)
	if _, ok := b.get(blob.ID); !ok {
		t.Fatal("a running task's blob expired")
	}
	b.release("task")
	clock.t = clock.t.Add(59 * time.Second)
	if _, ok := b.get(blob.ID); !ok {
		t.Fatal("gone inside the retention window")
	}
	clock.t = clock.t.Add(time.Second)
	if _, ok := b.get(blob.ID); ok {
		t.Fatal("readable after the retention window")
	}
	if b.len() != 0 || b.total != 0 {
		t.Fatalf("expired blob still held: %d blobs, %d bytes", b.len(), b.total)
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
		c.Blobs = BlobConfig{MaxBlobBytes: 1000, Retention: 300 * time.Millisecond}
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
	blob, ok := s.Blob(id)
	if !ok || string(blob.Content) != strings.Repeat("abc", 100) || blob.MediaType != "text/plain" || blob.Owner != r.Handle() || blob.RunID != "run-test" {
		t.Fatalf("blob = %+v, %v", blob, ok)
	}
	content, mediaType, owner, ok := s.ReadBlob(id)
	if !ok || len(content) != 300 || mediaType != "text/plain" || owner != r.Handle() {
		t.Fatalf("ReadBlob = %d bytes, %q, owner %q, %v", len(content), mediaType, owner, ok)
	}
	waitFor(t, func() bool { _, ok := s.Blob(id); return !ok })

	// 400 bytes against a cap of 300: refused, and the child says so.
	s2, _ := newSupervisor(t, "blob-put", func(c *Config) { c.Blobs = BlobConfig{MaxBlobBytes: 300} })
	r = start(t, s2, testPayload("abcd", time.Minute))
	res = result(t, r, 10*time.Second)
	if res.Status != api.StatusCompleted || res.Distillate.Reference != nil || !strings.Contains(res.Detail, "size cap") {
		t.Fatalf("oversized blob: %+v", res)
	}
}
