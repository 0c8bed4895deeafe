// Package blob is agentd's store of distillates too large to inline
// (store-and-reference) and of the large parts of finished tasks: bounded by
// count and bytes, in all and per caller, kept in memory or, through a
// Backend, in the durable task store. The supervisor owns one; the durable
// stores implement Backend importing only this package.
package blob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/budget"
)

// Config bounds the blob store, where children keep distillates too large to
// inline (store-and-reference) and the task engine keeps the large parts of
// finished tasks (the supervisor's StoreBlob). The zero value of a field
// means its default.
type Config struct {
	MaxBlobBytes  int           // one blob; default 4 MiB (a control frame bounds it too)
	MaxTotalBytes int64         // all blobs held; default 256 MiB
	MaxCount      int           // blobs held; default 1024
	QuotaBytes    int64         // the blobs of one caller; default MaxTotalBytes (no quota)
	QuotaCount    int           // the blobs of one caller; default MaxCount
	Retention     time.Duration // how long a blob outlives its task; default 1h
	// Backend, when set, keeps the blobs outside the process (agentd's
	// durable task store): the store writes each blob there before it
	// answers the child, holds only their index in memory, reads a blob's
	// content from there, and at New reloads the index (the same budgets
	// then count the blobs a previous process stored, as the anonymous
	// caller's: the backend does not keep the caller). A blob whose task
	// was running when that process ended starts its retention window at
	// the reload.
	Backend Backend
	// Now is the store's clock; nil is time.Now.
	Now func() time.Time
}

// Backend keeps stored distillates outside the process. Its implementations
// are safe for concurrent use.
type Backend interface {
	// SaveBlob stores a new blob, its content included.
	SaveBlob(ctx context.Context, b Stored) error
	// LoadBlob returns a blob's content; ok is false when it is not
	// stored.
	LoadBlob(ctx context.Context, id string) (content []byte, ok bool, err error)
	// ExpireBlobs sets the expiry of every blob of the tree rooted at owner
	// that has none.
	ExpireBlobs(ctx context.Context, owner string, at time.Time) error
	// DeleteBlob removes a blob; removing one that is not stored succeeds.
	DeleteBlob(ctx context.Context, id string) error
	// BlobIndex returns every stored blob without its content.
	BlobIndex(ctx context.Context) ([]Stored, error)
}

// Stored is a blob as a Backend keeps it: the Blob (Content nil in
// BlobIndex), its size, and when it expires (zero while its task runs).
type Stored struct {
	Blob
	Size    int
	Expires time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxBlobBytes <= 0 {
		c.MaxBlobBytes = 4 << 20
	}
	if c.MaxTotalBytes <= 0 {
		c.MaxTotalBytes = 256 << 20
	}
	if c.MaxCount <= 0 {
		c.MaxCount = 1024
	}
	if c.QuotaBytes <= 0 || c.QuotaBytes > c.MaxTotalBytes {
		c.QuotaBytes = c.MaxTotalBytes
	}
	if c.QuotaCount <= 0 || c.QuotaCount > c.MaxCount {
		c.QuotaCount = c.MaxCount
	}
	if c.Retention <= 0 {
		c.Retention = time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Blob is one stored distillate or part. Owner is the handle (A2A task id) of
// the task it belongs to, the root of the tree that stored it: a reader's
// right to it is a right to that task. Caller is who created that task, the
// blob store's quota and eviction key.
type Blob struct {
	ID        string
	MediaType string
	Content   []byte
	Owner     string
	Caller    string
	RunID     string
	Created   time.Time
}

// Errors of Store.Put; a child sees their text in the blob/put answer.
var (
	ErrTooLarge  = errors.New("blob: over the size cap")
	ErrStoreFull = errors.New("blob: store full")
)

// Store holds blobs for their task's lifetime plus a retention window,
// bounded by count and bytes, in all and per caller, as package budget's
// policy says: a blob of a running task is never evicted; to make room for a
// caller's blob, that caller's oldest finished blobs go first, then those of
// callers over their fair share; a put that still does not fit is refused.
// Expired blobs are dropped lazily, on Put and Get. It is safe for
// concurrent use; make one with New.
type Store struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex // guards blobs, led
	blobs map[string]*blobEntry
	led   *budget.Ledger[string]
}

type blobEntry struct {
	Blob       // Content nil when a backend holds it
	size int64 // len of the content
}

// New returns a store bounded by cfg that logs to log. With a Backend, it
// loads the index of the blobs stored there and starts the retention window
// of those whose task was running.
func New(cfg Config, log *slog.Logger) (*Store, error) {
	cfg = cfg.withDefaults()
	b := &Store{cfg: cfg, log: log, blobs: make(map[string]*blobEntry),
		led: budget.New[string](budget.Limits{MaxCount: cfg.MaxCount, MaxBytes: cfg.MaxTotalBytes, QuotaCount: cfg.QuotaCount, QuotaBytes: cfg.QuotaBytes})}
	if b.cfg.Backend == nil {
		return b, nil
	}
	ctx := context.Background()
	index, err := b.cfg.Backend.BlobIndex(ctx)
	if err != nil {
		return nil, fmt.Errorf("blob: load the stored distillates: %w", err)
	}
	now := b.cfg.Now()
	slices.SortFunc(index, func(x, y Stored) int { return x.Created.Compare(y.Created) })
	for _, sb := range index {
		e := &blobEntry{Blob: sb.Blob, size: int64(sb.Size)}
		e.Content = nil
		finished := sb.Expires.Add(-b.cfg.Retention) // the ledger counts retention from the finish
		if sb.Expires.IsZero() {
			// Its task ran in a process that is gone.
			finished = now
			if err := b.cfg.Backend.ExpireBlobs(ctx, e.Owner, now.Add(b.cfg.Retention)); err != nil {
				return nil, fmt.Errorf("blob: load the stored distillates: %w", err)
			}
		}
		b.blobs[e.ID] = e
		b.led.Load(e.ID, e.Caller, e.size, true, finished)
	}
	b.sweepLocked(now)
	return b, nil
}

// Put stores content for the task owner (the root of a tree) created by
// caller, for runID; finished makes it a blob of a task that has ended
// already, whose retention starts now. Content over the size cap is
// ErrTooLarge; a blob that does not fit once the evictable ones are gone is
// ErrStoreFull. With a Backend, the blob is written there before Put returns.
func (b *Store) Put(owner, caller, runID, mediaType string, content []byte, finished bool) (Blob, error) {
	if len(content) > b.cfg.MaxBlobBytes {
		return Blob{}, fmt.Errorf("%w: %d bytes, cap %d", ErrTooLarge, len(content), b.cfg.MaxBlobBytes)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.cfg.Now()
	b.sweepLocked(now)
	id := uuid.NewString() // random (v4): unguessable, though reads are also tied to the owner's task
	evicted, err := b.led.Admit(id, caller, int64(len(content)))
	if err != nil {
		n, bytes := b.led.Total()
		return Blob{}, fmt.Errorf("%w: %d blobs, %d bytes held: %w", ErrStoreFull, n, bytes, err)
	}
	for _, e := range evicted {
		b.dropLocked(e)
	}
	e := &blobEntry{Blob: Blob{ID: id, MediaType: mediaType, Content: content, Owner: owner, Caller: caller, RunID: runID, Created: now}, size: int64(len(content))}
	if b.cfg.Backend != nil {
		sb := Stored{Blob: e.Blob, Size: len(content)}
		if finished {
			sb.Expires = now.Add(b.cfg.Retention)
		}
		if err := b.cfg.Backend.SaveBlob(context.Background(), sb); err != nil {
			b.led.Remove(id)
			return Blob{}, fmt.Errorf("blob: save: %w", err)
		}
		e.Content = nil
	}
	b.blobs[id] = e
	if finished {
		b.led.Finish(id, now)
	}
	out := e.Blob
	out.Content = content
	return out, nil
}

// Get returns the blob with this id unless it is unknown or has expired (or
// its Backend cannot read it: that is logged).
func (b *Store) Get(id string) (Blob, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweepLocked(b.cfg.Now())
	e, ok := b.blobs[id]
	if !ok {
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

// Release starts the retention window of every blob of the tree rooted at
// owner: its task has ended.
func (b *Store) Release(owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var mine []*blobEntry
	for id, e := range b.blobs {
		if _, done := b.led.Finished(id); e.Owner == owner && !done {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		return
	}
	// Finished in the order they were stored, so the oldest goes first.
	slices.SortFunc(mine, func(x, y *blobEntry) int { return x.Created.Compare(y.Created) })
	now := b.cfg.Now()
	for _, e := range mine {
		b.led.Finish(e.ID, now)
	}
	if b.cfg.Backend != nil {
		if err := b.cfg.Backend.ExpireBlobs(context.Background(), owner, now.Add(b.cfg.Retention)); err != nil {
			b.log.Warn("stored distillates' expiry not recorded: they expire with the next start's retention", "owner", owner, "err", err)
		}
	}
}

// Len returns how many blobs are held.
func (b *Store) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.blobs)
}

// Usage returns the blobs and bytes held.
func (b *Store) Usage() (blobs int, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.led.Total()
}

// sweepLocked drops the blobs past their retention window.
func (b *Store) sweepLocked(now time.Time) {
	for _, id := range b.led.Expire(now.Add(-b.cfg.Retention)) {
		b.dropLocked(id)
	}
}

// dropLocked forgets a blob the ledger no longer holds, in the backend too.
func (b *Store) dropLocked(id string) {
	delete(b.blobs, id)
	if b.cfg.Backend != nil {
		if err := b.cfg.Backend.DeleteBlob(context.Background(), id); err != nil {
			b.log.Warn("evicted distillate not deleted from the store", "blob", id, "err", err)
		}
	}
}
