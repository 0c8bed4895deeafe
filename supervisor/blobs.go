package supervisor

import (
	"errors"
	"fmt"
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

	mu    sync.Mutex // guards blobs, total
	blobs map[string]*blobEntry
	total int64
}

type blobEntry struct {
	Blob
	expires time.Time // zero while the owning task runs
}

func newBlobStore(cfg BlobConfig) *blobStore {
	return &blobStore{cfg: cfg.withDefaults(), now: time.Now, blobs: make(map[string]*blobEntry)}
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
	}}
	b.blobs[e.ID] = e
	b.total += int64(len(content))
	return e.Blob, nil
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
	return e.Blob, true
}

// release starts the retention window of every blob of the tree rooted at
// owner: its task has ended.
func (b *blobStore) release(owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	exp := b.now().Add(b.cfg.Retention)
	for _, e := range b.blobs {
		if e.Owner == owner && e.expires.IsZero() {
			e.expires = exp
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
	b.total -= int64(len(e.Content))
}
