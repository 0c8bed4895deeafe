package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Group commit. The writes of a send (Create, Put, PutEnd) and Sync go
// through the store's writers: goroutines that each take every write queued
// while they were busy (up to maxBatch) and run them as one pgx batch,
// which is one implicit transaction: one round trip and one commit (one WAL
// flush) for them all, where each alone would cost its own. A write is
// answered only once its batch has committed; a batch of creates alone
// commits without waiting for the WAL flush (create's comment), any other
// waits for it, and then its creates are durable when answered.
//
// A statement that fails rolls its whole batch back. When the failure is
// one write's statement's (a unique key, a fenced task, a quota, no room),
// the others run again as a batch without it, and once they are done it
// runs alone (its failure may have been caused by a member that then
// committed, or did not) and is answered with that outcome; any other error
// of the database (a deadlock between two replicas' batches, a
// serialization failure) runs each write of the batch alone; a lost
// connection answers every write with it, and so does a batch not done
// within the lease (LeaseTTL): a database that hangs fails the writes, it
// does not hold them. So a write's outcome is what it would have been
// alone, after the writes that committed with its batch.
//
// Two writers run at once, each on a connection of the pool: while one
// waits for its commit's flush, the other sends the next batch. Their
// transactions never wait for each other's on the task counts: each
// connection of a replica counts in a shard of its own (migration 0005).

// maxBatch bounds the writes of one batch.
const maxBatch = 64

// writers is how many batches of one replica may be in flight at once.
const writers = 2

// writeOp is one queued write.
type writeOp struct {
	sync   bool // its commit must be flushed (a Put, Sync)
	create bool // a new task (counted as unflushed when its batch is not flushed)
	// owner orders the creates of a batch (the quotas' advisory locks are
	// taken in one order by every batch: no deadlock between batches); room
	// is made once for a caller's creates in a batch (queueMakeRoom), for
	// their ids and sizes.
	owner string
	id    string
	size  int64
	// queue queues the write's statements; read reads their results in
	// order and returns the first statement's error.
	queue func(b *pgx.Batch)
	read  func(br pgx.BatchResults) error
	err   error
	done  chan struct{}
}

// writeQueue holds the writes not yet taken by a writer.
type writeQueue struct {
	mu     sync.Mutex // guards ops, closed, busy
	ops    []*writeOp
	closed bool
	busy   int           // batches in flight (at most writers), a writer's or a caller's
	wake   chan struct{} // a write was queued, or a batch ended with writes queued (capacity 1)
}

// write queues o and returns its outcome once its batch has run, or ctx's
// error if ctx ends first (the write may commit all the same, as a
// statement cancelled in flight may). A write once queued is always run
// and answered (or failed, if the store closes first).
//
// A write that finds nothing queued and a batch's room free, and that
// cannot be cut short (ctx has no Done: the engine's writes, a create), runs
// as a batch of its own on its caller's goroutine: what a writer would do
// with it, without the two goroutine switches (to the writer and back).
func (s *Store) write(ctx context.Context, o *writeOp) error {
	o.done = make(chan struct{})
	q := &s.wq
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return errClosed
	}
	if ctx.Done() == nil && len(q.ops) == 0 && q.busy < writers {
		q.busy++
		q.mu.Unlock()
		s.runBatch([]*writeOp{o})
		q.finish()
		return o.err
	}
	q.ops = append(q.ops, o)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// take returns up to maxBatch queued writes, waking another writer when
// more are left; none while writers batches are in flight. A writer that
// takes some calls finish once they are answered.
func (q *writeQueue) take() []*writeOp {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.busy >= writers || len(q.ops) == 0 {
		return nil
	}
	q.busy++
	n := min(len(q.ops), maxBatch)
	batch := slices.Clone(q.ops[:n])
	q.ops = slices.Delete(q.ops, 0, n)
	if len(q.ops) > 0 {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	return batch
}

// finish records the end of a batch, waking a writer for the writes queued
// meanwhile.
func (q *writeQueue) finish() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.busy--
	if len(q.ops) > 0 {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// close fails the writes still queued, and every write queued from now on.
func (q *writeQueue) close() {
	q.mu.Lock()
	ops := q.ops
	q.ops, q.closed = nil, true
	q.mu.Unlock()
	for _, o := range ops {
		o.err = errClosed
		close(o.done)
	}
}

// writer runs batches of queued writes until ctx ends.
func (s *Store) writer(ctx context.Context) {
	defer s.wg.Done()
	for {
		select {
		case <-s.wq.wake:
		case <-ctx.Done():
			s.wq.close()
			return
		}
		for {
			batch := s.wq.take()
			if len(batch) == 0 {
				break
			}
			s.runBatch(batch)
			s.wq.finish()
		}
	}
}

// runBatch runs writes as one batch and answers each; see the top of the
// file for what a failure does.
func (s *Store) runBatch(batch []*writeOp) {
	answer := func(o *writeOp, err error) {
		o.err = err
		close(o.done)
	}
	// The creates in one order: by caller.
	slices.SortStableFunc(batch, func(a, b *writeOp) int {
		switch {
		case a.create && b.create:
			return strings.Compare(a.owner, b.owner)
		case a.create:
			return -1
		case b.create:
			return 1
		}
		return 0
	})
	// A write whose statement failed runs again alone once the others
	// have committed: its failure may have been another member's doing
	// (the same message twice in one batch, a quota that member filled),
	// and alone it meets only what committed.
	var again []*writeOp
	defer func() {
		for _, o := range again {
			s.runBatch([]*writeOp{o})
		}
	}()
	for len(batch) > 0 {
		failed, err := s.tryBatch(batch)
		var pe *pgconn.PgError
		switch {
		case err == nil:
			for _, o := range batch {
				answer(o, nil)
			}
			return
		case len(batch) == 1:
			answer(batch[0], err)
			return
		case failed >= 0 && errors.As(err, &pe) && !batchError(pe):
			again = append(again, batch[failed])
			batch = slices.Delete(batch, failed, failed+1)
		case errors.As(err, &pe):
			for _, o := range batch {
				s.runBatch([]*writeOp{o})
			}
			return
		default: // the connection, the pool: every write's
			for _, o := range batch {
				answer(o, err)
			}
			return
		}
	}
}

// batchError reports whether a database error is the batch's rather than
// one statement's: a deadlock or a serialization failure (another
// transaction's locks), or the transaction's end.
func batchError(pe *pgconn.PgError) bool {
	switch pe.Code {
	case "40P01", "40001", "25P02":
		return true
	}
	return false
}

// tryBatch runs the writes as one batch: nil, or the error and the index of
// the write whose statement failed (-1: none of them).
func (s *Store) tryBatch(batch []*writeOp) (int, error) {
	b := &pgx.Batch{}
	sync, creates := false, 0
	for _, o := range batch {
		sync = sync || o.sync
		if o.create {
			creates++
		}
	}
	if !sync {
		b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	}
	now := s.now()
	expire := creates > 0 && s.opts.Retention > 0 && now-s.expired.Load() >= int64(time.Second)
	if expire {
		b.Queue(`DELETE FROM tasks WHERE id IN (SELECT id FROM tasks WHERE finished_ns IS NOT NULL AND finished_ns <= $1
			ORDER BY finished_ns LIMIT 256 FOR UPDATE SKIP LOCKED)`, s.cutoff())
	}
	for i, o := range batch {
		if j := runEnd(batch, i); j > i {
			s.queueMakeRoom(b, batch[i:j])
		}
		o.queue(b)
	}
	target := s.unflushed.Load() // a flushed commit flushes these
	// A database that stops answering (a partition, a stopped server) fails
	// the batch after a lease: by then other replicas may have taken this
	// one's tasks over, and the writes queued behind it are not held longer.
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.LeaseTTL)
	defer cancel()
	br := s.pool.SendBatch(ctx, b)
	var err error
	if !sync {
		_, err = br.Exec()
	}
	if err == nil && expire {
		_, err = br.Exec()
	}
	failed := -1
	if err == nil {
		for i, o := range batch {
			if runEnd(batch, i) > i {
				// The room made for the run of creates this one begins: a
				// refusal is its first create's (runBatch runs it alone).
				if _, err = br.Exec(); err != nil {
					failed = i
					break
				}
			}
			if err = o.read(br); err != nil {
				failed = i
				break
			}
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err, failed = cerr, -1
	}
	if err != nil {
		return failed, err
	}
	if expire {
		s.expired.Store(now)
	}
	if sync {
		s.markFlushed(target)
	} else {
		s.unflushed.Add(int64(creates))
	}
	return -1, nil
}

// runEnd returns the end of the run of one caller's creates that begins at
// batch[i] (creates are sorted first, by caller), or i when batch[i] begins
// none.
func runEnd(batch []*writeOp, i int) int {
	o := batch[i]
	if !o.create || (i > 0 && batch[i-1].create && batch[i-1].owner == o.owner) {
		return i
	}
	j := i + 1
	for j < len(batch) && batch[j].create && batch[j].owner == o.owner {
		j++
	}
	return j
}
