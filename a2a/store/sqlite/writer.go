package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// Group commit. The writes go through one goroutine, the writer, which owns
// the writer connection (a staged write, below, that finds the writer idle
// and nothing queued runs on its caller's goroutine instead, holding the
// connection as the writer would, and so does a write that commits while
// the writes come one at a time: see enqueue): it takes every write queued
// while it was busy, runs each in a savepoint of one transaction (a write that fails undoes only
// itself), commits once, and only then answers them. Nothing is answered
// before its commit, but for one kind of write: a new task (Create) is
// staged. Its insert runs in the open transaction at once, so whatever
// refuses it (an existing id, a duplicate message, no room) is known and
// answered, and the transaction stays open for the writes that follow, at
// most stageLinger: the next write that must be stored, a read (Sync), the
// linger's end or Close commits it. A task whose first and last snapshots
// both fall within that time (an instant agent's send) costs one
// transaction, not two. The engine calls Sync before anyone is told of a task
// (tasks.Syncer), and every read of this store syncs first, so that no one
// sees less than what a write that returned did; a process killed meanwhile
// loses only tasks no one was told of, whose executors die with it. A
// commit that fails (a full disk) loses the staged creations it held: the
// store records them before it clears staged, and SyncTask, which the
// engine calls before anyone is told of a task (tasks.TaskSyncer), fails
// for each of them, even after the linger's commit failed with no one
// waiting.

// stageLinger is how long a staged write waits for the writes that follow
// before it is committed anyway.
const stageLinger = 2 * time.Millisecond

// maxBatch bounds the writes of one transaction.
const maxBatch = 256

// writeOp is one queued write.
type writeOp struct {
	op    string // the operation, for errors
	alone bool   // run outside any transaction (a checkpoint)
	stage bool   // answered once run, committed later (Create)
	id    string // a staged write's task (lost when its commit fails)
	fn    func(*wtx) error
	done  chan error
}

// wtx is a write's view of the writer's transaction on the writer's
// connection: its statements are prepared once per store.
type wtx struct {
	s *Store
}

var ctxBG = context.Background()

// ExecContext runs a statement of the transaction (ctx is the writer's).
func (w *wtx) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	st, err := w.s.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctxBG, args...)
}

// QueryRowContext runs a query of the transaction (ctx is the writer's).
func (w *wtx) QueryRowContext(_ context.Context, query string, args ...any) *sql.Row {
	st, err := w.s.stmt(query)
	if err != nil {
		// A query that does not prepare fails the same way on its row.
		return w.s.wc.QueryRowContext(ctxBG, query, args...)
	}
	return st.QueryRowContext(ctxBG, args...)
}

// stmts caches the writer's prepared statements by their SQL.
type stmts struct {
	mu sync.Mutex // guards m
	m  map[string]*sql.Stmt
}

// stmt returns the prepared statement of query on the writer's connection.
func (s *Store) stmt(query string) (*sql.Stmt, error) {
	s.stmts.mu.Lock()
	defer s.stmts.mu.Unlock()
	if st, ok := s.stmts.m[query]; ok {
		return st, nil
	}
	st, err := s.wc.PrepareContext(ctxBG, query)
	if err != nil {
		return nil, err
	}
	if s.stmts.m == nil {
		s.stmts.m = map[string]*sql.Stmt{}
	}
	s.stmts.m[query] = st
	return st, nil
}

// write runs fn in the writer's next transaction and returns once that has
// committed (or failed). fn's error undoes what fn did, and is write's.
func (s *Store) write(ctx context.Context, op string, fn func(*wtx) error) error {
	return s.enqueue(ctx, &writeOp{op: op, fn: fn, done: make(chan error, 1)})
}

// stageWrite runs fn in the writer's open transaction and returns once it
// ran, before the transaction commits (see stageLinger).
// id is the task it creates: if that transaction's commit fails, SyncTask
// says the creation was lost.
func (s *Store) stageWrite(ctx context.Context, op, id string, fn func(*wtx) error) error {
	return s.enqueue(ctx, &writeOp{op: op, stage: true, id: id, fn: fn, done: make(chan error, 1)})
}

// Sync implements tasks.Syncer: it returns once every write that returned
// before it is committed, or failed. A staged creation whose transaction
// failed before this call is not Sync's error (it was another caller's
// too): SyncTask names the task whose creation must be stored.
func (s *Store) Sync(ctx context.Context) error {
	if !s.staged.Load() {
		return nil
	}
	return s.write(ctx, "sync", func(*wtx) error { return nil })
}

// SyncTask implements tasks.TaskSyncer: Sync, and an error wrapping
// tasks.ErrStoreUnavailable when the staged creation of task id was lost,
// its transaction's commit having failed (a full disk), before or during
// this call (every time it is asked, while the store remembers the last
// maxLost of them).
//
// A Sync that fails otherwise is SyncTask's error only if the store is
// closed: a commit that fails records every creation it held as lost
// first, so a creation not recorded was committed before it.
func (s *Store) SyncTask(ctx context.Context, id a2a.TaskID) error {
	err := s.Sync(ctx)
	if lost := s.lostCreation(string(id)); lost != nil {
		return s.unavailable("sync task "+string(id), lost)
	}
	if err != nil && (errors.Is(err, errClosed) || ctx.Err() != nil) {
		return err
	}
	return nil
}

// maxLost bounds the lost creations remembered for SyncTask: the oldest go
// first (a task whose creation was lost and that no one synced since).
const maxLost = 4096

// lostCreations are the tasks whose staged creation was lost, with the
// commit's error, the last maxLost of them (task ids are never reused).
// Safe for concurrent use.
type lostCreations struct {
	mu    sync.Mutex // guards m, order
	m     map[string]error
	order []string
}

// lose records the staged creations of a transaction that failed with err.
func (s *Store) lose(ids []string, err error) {
	if len(ids) == 0 {
		return
	}
	l := &s.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]error{}
	}
	for _, id := range ids {
		l.m[id] = err
		l.order = append(l.order, id)
	}
	for len(l.order) > maxLost {
		delete(l.m, l.order[0])
		l.order = l.order[1:]
	}
}

// lostCreation returns the error that lost id's creation, nil when it was
// not lost.
func (s *Store) lostCreation(id string) error {
	l := &s.lost
	l.mu.Lock()
	defer l.mu.Unlock()
	err, ok := l.m[id]
	if !ok {
		return nil
	}
	return fmt.Errorf("the task's creation was not committed: %w", err)
}

// writeAlone runs fn on the writer's connection outside any transaction,
// between two of them.
func (s *Store) writeAlone(ctx context.Context, op string, fn func(*wtx) error) error {
	return s.enqueue(ctx, &writeOp{op: op, alone: true, fn: fn, done: make(chan error, 1)})
}

func (s *Store) enqueue(ctx context.Context, o *writeOp) error {
	op := o.op
	// A staged write (a new task), nothing queued or in the writer's hands,
	// and the connection free: it runs here, on the caller's goroutine, as
	// the writer would run it (two goroutine switches fewer). Only a staged
	// one, which commits nothing: the writes that commit go to the writer,
	// whose batches group the commits (a commit of its own for each write
	// run here halved them under load). Once anything is queued, every write
	// queues behind it: none overtakes the writer's batch.
	//
	// A write that commits runs here too while the writes come one at a
	// time (solo): at concurrency 1 the writer's hand-offs, there and back,
	// were a large share of a send's CPU. As soon as a write is queued
	// while one commits here, the writes go to the writer again, until it
	// runs a batch of one with nothing queued behind it.
	if (o.stage || (s.solo.Load() && !o.alone)) && s.pending.Load() == 0 && s.wmu.TryLock() {
		if !s.wclosed && s.pending.Load() == 0 {
			if err := ctx.Err(); err != nil {
				s.wmu.Unlock()
				return err
			}
			s.runBatch([]*writeOp{o})
			if !o.stage && s.pending.Load() > 0 {
				s.solo.Store(false)
			}
			s.wmu.Unlock()
			return <-o.done
		}
		s.wmu.Unlock()
	}
	s.pending.Add(1)
	select {
	case s.ops <- o:
	case <-s.quit:
		s.pending.Add(-1)
		return fmt.Errorf("%s: %w", op, errClosed)
	case <-ctx.Done():
		s.pending.Add(-1)
		return ctx.Err()
	}
	// Once queued, the write is waited for: it may commit whatever ctx
	// does, and its caller is told so.
	select {
	case err := <-o.done:
		return err
	case <-s.writerDone:
		select {
		case err := <-o.done:
			return err
		default:
			return fmt.Errorf("%s: %w", op, errClosed)
		}
	}
}

// writer runs the queued writes until the store closes, and commits the
// staged ones at the linger's end.
func (s *Store) writer() {
	defer close(s.writerDone)
	batch := make([]*writeOp, 0, maxBatch)
	for {
		select {
		case o := <-s.ops:
			batch = append(batch[:0], o)
		case <-s.linger.C:
			s.wmu.Lock()
			s.end(s.open)
			s.open = false
			s.wmu.Unlock()
			continue
		case <-s.quit:
			s.wmu.Lock()
			s.end(s.open)
			s.open, s.wclosed = false, true
			s.wmu.Unlock()
			s.drainClosed()
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break more
			}
		}
		s.wmu.Lock()
		s.runBatch(batch)
		s.wmu.Unlock()
		left := s.pending.Add(-int64(len(batch)))
		s.solo.Store(len(batch) == 1 && left == 0)
		clear(batch) // the ops run: what they wrote (a task's snapshot) is not held until the next batch
	}
}

// runBatch runs writes in order, the ones alone between two transactions,
// the others in the open transaction; s.wmu is held.
func (s *Store) runBatch(batch []*writeOp) {
	for len(batch) > 0 {
		if batch[0].alone {
			s.end(s.open)
			s.open = false
			batch[0].done <- batch[0].fn(&wtx{s: s})
			batch = batch[1:]
			continue
		}
		n := 1
		for n < len(batch) && !batch[n].alone {
			n++
		}
		was := s.open
		s.open = s.run(batch[:n], s.open)
		if s.open && !was {
			s.linger.Reset(stageLinger)
		}
		batch = batch[n:]
	}
}

// run runs writes in the open transaction (begun if open is false), answers
// the staged ones, and commits unless all were staged; it reports whether a
// transaction stays open.
func (s *Store) run(batch []*writeOp, open bool) bool {
	w := &wtx{s: s}
	if !open {
		if _, err := w.ExecContext(ctxBG, `BEGIN IMMEDIATE`); err != nil {
			for _, o := range batch {
				o.done <- s.unavailable(o.op, err)
			}
			return false
		}
	}
	errs := make([]error, len(batch))
	var waiting []*writeOp // the writes answered at the commit
	var werrs []error
	// fresh: the transaction holds no write yet, so the next write needs no
	// savepoint: one that fails rolls the whole transaction back, and a new
	// one begins for the writes after it.
	fresh := !open
	for i, o := range batch {
		if fresh {
			fresh = false
			if errs[i] = o.fn(w); errs[i] != nil {
				if _, err := w.ExecContext(ctxBG, `ROLLBACK`); err != nil {
					s.abort(batch[i:], waiting, err)
					return false
				}
				o.done <- errs[i]
				if i+1 == len(batch) {
					return false
				}
				if _, err := w.ExecContext(ctxBG, `BEGIN IMMEDIATE`); err != nil {
					for _, o := range batch[i+1:] {
						o.done <- s.unavailable(o.op, err)
					}
					return false
				}
				fresh = true
				continue
			}
		} else {
			if _, err := w.ExecContext(ctxBG, `SAVEPOINT w`); err != nil {
				s.abort(batch[i:], waiting, err)
				return false
			}
			if errs[i] = o.fn(w); errs[i] != nil {
				if _, err := w.ExecContext(ctxBG, `ROLLBACK TO w`); err != nil {
					s.abort(batch[i:], waiting, err)
					return false
				}
			}
			if _, err := w.ExecContext(ctxBG, `RELEASE w`); err != nil {
				s.abort(batch[i:], waiting, err)
				return false
			}
		}
		if !o.stage {
			waiting, werrs = append(waiting, o), append(werrs, errs[i])
			continue
		}
		if errs[i] == nil {
			// Before the answer: a read that follows it syncs, and a commit
			// that fails loses it (SyncTask).
			s.stagedIDs = append(s.stagedIDs, o.id)
			s.staged.Store(true)
		}
		o.done <- errs[i]
	}
	if len(waiting) == 0 {
		return true
	}
	err := s.end(true)
	for i, o := range waiting {
		if err != nil {
			o.done <- s.unavailable(o.op, err)
			continue
		}
		o.done <- werrs[i]
	}
	return false
}

// abort rolls the open transaction back after a failure of the database:
// every write not yet answered fails.
func (s *Store) abort(rest, waiting []*writeOp, err error) {
	(&wtx{s: s}).ExecContext(ctxBG, `ROLLBACK`)
	if len(s.stagedIDs) > 0 {
		s.opts.Log.Error("task store: staged writes lost", "tasks", len(s.stagedIDs), "err", err)
	}
	s.lose(s.stagedIDs, err)
	s.stagedIDs = s.stagedIDs[:0]
	s.staged.Store(false)
	for _, o := range append(waiting, rest...) {
		o.done <- s.unavailable(o.op, err)
	}
}

// end commits the open transaction, if there is one; a commit that fails
// rolls it back: the staged creations are lost (SyncTask reports them),
// before staged is cleared, so that a Sync that finds nothing staged finds
// them lost, and the tasks' next writes fail.
func (s *Store) end(open bool) error {
	if !open {
		return nil
	}
	w := &wtx{s: s}
	_, err := w.ExecContext(ctxBG, `COMMIT`)
	if err != nil {
		w.ExecContext(ctxBG, `ROLLBACK`)
		s.opts.Log.Error("task store: commit failed", "tasks_lost", len(s.stagedIDs), "err", err)
		s.lose(s.stagedIDs, err)
	}
	s.stagedIDs = s.stagedIDs[:0]
	s.staged.Store(false)
	return err
}

// drainClosed answers the writes still queued when the store closes.
func (s *Store) drainClosed() {
	for {
		select {
		case o := <-s.ops:
			o.done <- fmt.Errorf("%s: %w", o.op, errClosed)
		default:
			return
		}
	}
}

// checkpointInterval is how often the checkpointer copies the WAL's
// committed pages into the database.
var checkpointInterval = 250 * time.Millisecond

// restartFrames is the WAL's length, in frames, from which the
// checkpointer makes the writer start the WAL over (checkpoint): 32 MiB of
// 4 KiB pages.
var restartFrames = 8192

// checkpointer checkpoints every checkpointInterval until the store closes.
func (s *Store) checkpointer() {
	defer close(s.checkpointerDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := s.checkpoint(); err != nil {
				s.opts.Log.Warn("task store: checkpoint failed", "err", err)
			}
		case <-s.quit:
			return
		}
	}
}

// checkpoint copies the WAL's committed pages into the database, in two
// steps when the WAL is long. A passive checkpoint never waits for the
// writer or the readers, and the writer's next transaction starts the WAL
// over from its first frame only if the checkpoint before it copied every
// frame the WAL holds. Under a steady load the writer commits while the
// checkpoint copies, so that never happens: the WAL grew by every commit
// (400 MB after 13,000 sends), each of its writes extending the file. So,
// first a passive checkpoint beside the writer, which copies nearly all;
// then, if the WAL holds restartFrames or more, another beside the writer,
// which copies what was committed during the first (a shorter while), and
// a last one while the writer's connection is held between two
// transactions (s.wmu; a staged transaction is committed first, as its
// linger would), which copies only what was committed during the second:
// the writer waits that long (mostly the checkpoint's two fsyncs), and its
// next transaction restarts the WAL.
func (s *Store) checkpoint() error {
	var busy, frames, copied int
	if err := s.ck.QueryRowContext(ctxBG, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		return err
	}
	if frames < restartFrames {
		return nil
	}
	if err := s.ck.QueryRowContext(ctxBG, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wclosed {
		return nil
	}
	s.end(s.open)
	s.open = false
	return s.ck.QueryRowContext(ctxBG, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
}

// readStmts are the readers' queries, each prepared once on the reader pool
// (database/sql prepares it on each reader connection the first time it runs
// there and keeps it), by their SQL. It is safe for concurrent use; the zero
// value prepares on db once db is set.
type readStmts struct {
	db *sql.DB
	mu sync.Mutex // guards m
	m  map[string]*sql.Stmt
}

// stmt returns the prepared statement of query.
// It never holds the lock while it prepares (that waits for a reader
// connection, which one holding the lock could need).
func (r *readStmts) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	r.mu.Lock()
	st, ok := r.m[query]
	r.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := r.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if had, ok := r.m[query]; ok {
		st.Close()
		return had, nil
	}
	if r.m == nil {
		r.m = map[string]*sql.Stmt{}
	}
	r.m[query] = st
	return st, nil
}

// QueryRowContext runs a one-row query on a reader connection.
func (r *readStmts) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := r.stmt(ctx, query)
	if err != nil {
		// A query that does not prepare fails the same way on its row.
		return r.db.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// QueryContext runs a query on a reader connection.
func (r *readStmts) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := r.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// close closes the prepared statements.
func (r *readStmts) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range r.m {
		st.Close()
	}
	r.m = nil
}
