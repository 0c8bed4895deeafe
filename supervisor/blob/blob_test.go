package blob

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/testkit"
)

func newTestStore(t *testing.T, cfg Config) (*Store, *testkit.Clock) {
	t.Helper()
	clock := testkit.NewClock()
	cfg.Now = clock.Now
	b, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return b, clock
}

func TestStoreCaps(t *testing.T) {
	b, clock := newTestStore(t, Config{MaxBlobBytes: 10, MaxTotalBytes: 25, MaxCount: 3, Retention: time.Minute})
	if _, err := b.Put("task", "caller", "run", "text/plain", []byte("01234567890"), false); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("11 bytes over a cap of 10: %v", err)
	}
	var ids []string
	for i := 0; i < 3; i++ {
		blob, err := b.Put("live", "caller", "run", "text/plain", []byte("0123456"), false)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := api.ParseBlobURI(api.BlobURI(blob.ID)); !ok {
			t.Fatalf("id %q does not make a blob uri", blob.ID)
		}
		ids = append(ids, blob.ID)
		clock.Advance(time.Second)
	}
	// Full on count, and every blob belongs to a running task: refused.
	if _, err := b.Put("other", "caller", "run", "text/plain", []byte("x"), false); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("put into a store full of live blobs: %v", err)
	}
	// The task ends: its blobs may now be evicted, oldest first.
	b.Release("live")
	if _, err := b.Put("other", "caller", "run", "text/plain", []byte("x"), false); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Get(ids[0]); ok {
		t.Fatal("the oldest finished blob was not evicted")
	}
	if blob, ok := b.Get(ids[1]); !ok || string(blob.Content) != "0123456" || blob.Owner != "live" {
		t.Fatalf("second blob: %+v %v", blob, ok)
	}
	// Over the byte total (7+7+1 held, +10 = 25 fits; +11 would not) evicts too.
	if _, err := b.Put("other", "caller", "run", "text/plain", []byte("0123456789"), false); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 3 {
		t.Fatalf("%d blobs held, want 3", b.Len())
	}
}

// A caller's blobs evict that caller's oldest finished ones first, never
// another caller's within its quota; StoreBlob's blobs are finished at once.
func TestStorePerCaller(t *testing.T) {
	b, clock := newTestStore(t, Config{MaxBlobBytes: 10, MaxTotalBytes: 40, QuotaBytes: 20, Retention: time.Hour})
	bob, err := b.Put("bob-task", "bob", "", "text/plain", []byte("0123456789"), true)
	if err != nil {
		t.Fatal(err)
	}
	var alice []string
	for range 4 {
		clock.Advance(time.Second)
		blob, err := b.Put("alice-task", "alice", "", "text/plain", []byte("0123456789"), true)
		if err != nil {
			t.Fatal(err)
		}
		alice = append(alice, blob.ID)
	}
	if _, ok := b.Get(bob.ID); !ok {
		t.Fatal("bob's blob went to alice's")
	}
	if _, ok := b.Get(alice[1]); ok {
		t.Fatal("alice holds more than her 20-byte quota")
	}
	if _, ok := b.Get(alice[3]); !ok {
		t.Fatal("alice's newest blob is gone")
	}
	// A caller whose quota holds only a running task's blobs is refused.
	b.Put("carol-task", "carol", "run", "text/plain", []byte("0123456789"), false)
	b.Put("carol-task", "carol", "run", "text/plain", []byte("0123456789"), false)
	if _, err := b.Put("carol-task", "carol", "run", "text/plain", []byte("x"), false); !errors.Is(err, ErrStoreFull) {
		t.Fatalf("carol over her quota: %v", err)
	}
}

func TestStoreRetention(t *testing.T) {
	b, clock := newTestStore(t, Config{Retention: time.Minute})
	blob, err := b.Put("task", "caller", "run", "text/plain", []byte("kept"), false)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(24 * time.Hour)
	if _, ok := b.Get(blob.ID); !ok {
		t.Fatal("a running task's blob expired")
	}
	b.Release("task")
	clock.Advance(59 * time.Second)
	if _, ok := b.Get(blob.ID); !ok {
		t.Fatal("gone inside the retention window")
	}
	clock.Advance(time.Second)
	if _, ok := b.Get(blob.ID); ok {
		t.Fatal("readable after the retention window")
	}
	if n, bytes := b.Usage(); b.Len() != 0 || n != 0 || bytes != 0 {
		t.Fatalf("expired blob still held: %d blobs, %d bytes", n, bytes)
	}
	if _, ok := b.Get("no-such-id"); ok {
		t.Fatal("an unknown id was found")
	}
}
