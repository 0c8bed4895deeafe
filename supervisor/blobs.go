package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// BlobConfig bounds the blob store, where children keep distillates too large
// to inline (store-and-reference). The zero value of a field means its default.
type BlobConfig struct {
	MaxBlobBytes  int           // one blob; default 4 MiB (a control frame bounds it too)
	MaxTotalBytes int64         // all blobs held; default 256 MiB
	MaxCount      int           // blobs held; default 1024
	Retention     time.Duration // how long a blob outlives its task; default 1h
	// Backend, when set, keeps the blobs outside the process (agentd's
	// durable task store): the store writes each blob there before it
	// answers the child, holds only their index in memory, reads a blob's
	// content from there, and at New reloads the index (the same budgets
	// then count the blobs a previous process stored). A blob whose task
	// was running when that process ended starts its retention window at
	// the reload.
	Backend BlobBackend
}

// BlobBackend keeps stored distillates outside the process. It is safe for
// concurrent use.
type BlobBackend interface {
	// SaveBlob stores a new blob, its content included.
	SaveBlob(ctx context.Context, b StoredBlob) error
	// LoadBlob returns a blob's content; ok is false when it is not
	// stored.
	LoadBlob(ctx context.Context, id string) (content []byte, ok bool, err error)
	// ExpireBlobs sets the expiry of every blob of the tree rooted at owner
	// that has none.
	ExpireBlobs(ctx context.Context, owner string, at time.Time) error
	// DeleteBlob removes a blob; removing one that is not stored succeeds.
	DeleteBlob(ctx context.Context, id string) error
	// BlobIndex returns every stored blob without its content.
	BlobIndex(ctx context.Context) ([]StoredBlob, error)
}

// StoredBlob is a blob as a BlobBackend keeps it: the Blob (Content nil in
// BlobIndex), its size, and when it expires (zero while its task runs).
type StoredBlob struct {
	Blob
	Size    int
	Expires time.Time
}

func (c BlobConfig) withDefaults() BlobConfig {
	if c.MaxBlobBytes <= 0 {
		c.MaxBlobBytes = 4 << 20
	}
	if c.MaxTotalBytes <= 0 {
		c.MaxTotalBytes = 256 << 20
	}
	if c.MaxCount <= 0 {
		c.MaxCount = 1024
	}
	if c.Retention <= 0 {
		c.Retention = time.Hour
	}
	return c
}

// Blob is one stored distillate. Owner is the handle (A2A task id) of the root
// of the tree that stored it; a reader's right to it is a right to that task.
type Blob struct {
	ID        string
	MediaType string
	Content   []byte
	Owner     string
	RunID     string
	Created   time.Time
}

// Errors of the blob store; the child sees their text in the blob/put answer.
var (
	ErrBlobTooLarge  = errors.New("supervisor: blob over the size cap")
	ErrBlobStoreFull = errors.New("supervisor: blob store full")
)

// blobStore holds blobs for their task's lifetime plus a retention window. A
// blob of a running task is never evicted; when the store is full, blobs of
// finished tasks go oldest first, and a put that still does not fit is
// refused. Expired blobs are dropped lazily, on put and get.
type blobStore struct {
	cfg BlobConfig
	now func() time.Time
	log *slog.Logger

	mu    sync.Mutex // guards blobs, total
	blobs map[string]*blobEntry
	total int64
}

type blobEntry struct {
	Blob              // Content nil when a backend holds it
	size    int64     // len of the content
	expires time.Time // zero while the owning task runs
}

func newBlobStore(cfg BlobConfig, log *slog.Logger) (*blobStore, error) {
	b := &blobStore{cfg: cfg.withDefaults(), now: time.Now, log: log, blobs: make(map[string]*blobEntry)}
	if b.cfg.Backend == nil {
		return b, nil
	}
	ctx := context.Background()
	index, err := b.cfg.Backend.BlobIndex(ctx)
	if err != nil {
		return nil, fmt.Errorf("supervisor: load the stored distillates: %w", err)
	}
	exp := b.now().Add(b.cfg.Retention)
	for _, sb := range index {
		e := &blobEntry{Blob: sb.Blob, size: int64(sb.Size), expires: sb.Expires}
		e.Content = nil
		if e.expires.IsZero() {
			// Its task ran in a process that is gone.
			e.expires = exp
			if err := b.cfg.Backend.ExpireBlobs(ctx, e.Owner, exp); err != nil {
				return nil, fmt.Errorf("supervisor: load the stored distillates: %w", err)
			}
		}
		b.blobs[e.ID] = e
		b.total += e.size
	}
	b.sweepLocked(b.now())
	return b, nil
}

// put stores content for the tree rooted at owner.
func (b *blobStore) put(owner, runID, mediaType string, content []byte) (Blob, error) {
	if len(content) > b.cfg.MaxBlobBytes {
		return Blob{}, fmt.Errorf("%w: %d bytes, cap %d", ErrBlobTooLarge, len(content), b.cfg.MaxBlobBytes)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.sweepLocked(now)
	for len(b.blobs) >= b.cfg.MaxCount || b.total+int64(len(content)) > b.cfg.MaxTotalBytes {
		if !b.evictOldestFinishedLocked() {
			return Blob{}, fmt.Errorf("%w: %d blobs, %d bytes held by running tasks", ErrBlobStoreFull, len(b.blobs), b.total)
		}
	}
	e := &blobEntry{Blob: Blob{
		ID:        uuid.NewString(), // random (v4): unguessable, though reads are also tied to the owner's task
		MediaType: mediaType,
		Content:   content,
		Owner:     owner,
		RunID:     runID,
		Created:   now,
	}, size: int64(len(content))}
	if b.cfg.Backend != nil {
		if err := b.cfg.Backend.SaveBlob(context.Background(), StoredBlob{Blob: e.Blob, Size: len(content)}); err != nil {
			return Blob{}, fmt.Errorf("supervisor: store the blob: %w", err)
		}
		e.Content = nil
	}
	b.blobs[e.ID] = e
	b.total += e.size
	out := e.Blob
	out.Content = content
	return out, nil
}

// get returns the blob with this id unless it has expired.
func (b *blobStore) get(id string) (Blob, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.blobs[id]
	if !ok {
		return Blob{}, false
	}
	if !e.expires.IsZero() && !b.now().Before(e.expires) {
		b.dropLocked(e)
		return Blob{}, false
	}
	out := e.Blob
	if out.Content == nil && b.cfg.Backend != nil {
		content, ok, err := b.cfg.Backend.LoadBlob(context.Background(), id)
		if err != nil || !ok {
			if err != nil {
				b.log.Warn("stored distillate not read", "blob", id, "err", err)
			}
			return Blob{}, false
		}
		out.Content = content
	}
	return out, true
}

// release starts the retention window of every blob of the tree rooted at
// owner: its task has ended.
func (b *blobStore) release(owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	exp := b.now().Add(b.cfg.Retention)
	released := false
	for _, e := range b.blobs {
		if e.Owner == owner && e.expires.IsZero() {
			e.expires = exp
			released = true
		}
	}
	if released && b.cfg.Backend != nil {
		if err := b.cfg.Backend.ExpireBlobs(context.Background(), owner, exp); err != nil {
			b.log.Warn("stored distillates' expiry not recorded: they expire with the next start's retention", "owner", owner, "err", err)
		}
	}
}

// len returns how many blobs are held, expired ones not yet swept included.
func (b *blobStore) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.blobs)
}

func (b *blobStore) sweepLocked(now time.Time) {
	for _, e := range b.blobs {
		if !e.expires.IsZero() && !now.Before(e.expires) {
			b.dropLocked(e)
		}
	}
}

func (b *blobStore) evictOldestFinishedLocked() bool {
	var oldest *blobEntry
	for _, e := range b.blobs {
		if !e.expires.IsZero() && (oldest == nil || e.Created.Before(oldest.Created)) {
			oldest = e
		}
	}
	if oldest == nil {
		return false
	}
	b.dropLocked(oldest)
	return true
}

func (b *blobStore) dropLocked(e *blobEntry) {
	delete(b.blobs, e.ID)
	b.total -= e.size
	if b.cfg.Backend != nil {
		if err := b.cfg.Backend.DeleteBlob(context.Background(), e.ID); err != nil {
			b.log.Warn("expired distillate not deleted from the store", "blob", e.ID, "err", err)
		}
	}
}
