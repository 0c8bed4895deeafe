package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// Group commit. The writes go through one goroutine, the writer, which owns
// the writer connection: it takes every write queued while it was busy, runs
// each in a savepoint of one transaction (a write that fails undoes only
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
// loses only tasks no one was told of, whose executors die with it.
//
// Under load the transaction also waits a little for the tasks staged in
// it: a task's snapshot (Put) may wait up to commitDelay for the terminal
// snapshots of the other tasks staged in the same transaction, so that one
// commit stores several sends, not one each. It still answers nothing before
// the commit; a sync or any other write commits at once.

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
	task  string // the task a staged write creates or a held write stores
	ends  bool   // a held write that stores its task's terminal snapshot
	hold  bool   // its commit may wait for the staged tasks' ends (commitDelay)
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

// stageWrite runs fn, the creation of task, in the writer's open transaction
// and returns once it ran, before the transaction commits (see
// stageLinger).
func (s *Store) stageWrite(ctx context.Context, op, task string, fn func(*wtx) error) error {
	return s.enqueue(ctx, &writeOp{op: op, stage: true, task: task, fn: fn, done: make(chan error, 1)})
}

// holdWrite is write for a snapshot of task (terminal: ends), whose commit
// may wait commitDelay for the ends of the other tasks staged in the
// transaction.
func (s *Store) holdWrite(ctx context.Context, op, task string, ends bool, fn func(*wtx) error) error {
	return s.enqueue(ctx, &writeOp{op: op, hold: true, task: task, ends: ends, fn: fn, done: make(chan error, 1)})
}

// Sync implements tasks.Syncer: it returns once every write that returned
// before it is committed.
func (s *Store) Sync(ctx context.Context) error {
	if !s.staged.Load() {
		return nil
	}
	return s.write(ctx, "sync", func(*wtx) error { return nil })
}

// writeAlone runs fn on the writer's connection outside any transaction,
// between two of them.
func (s *Store) writeAlone(ctx context.Context, op string, fn func(*wtx) error) error {
	return s.enqueue(ctx, &writeOp{op: op, alone: true, fn: fn, done: make(chan error, 1)})
}

func (s *Store) enqueue(ctx context.Context, o *writeOp) error {
	op := o.op
	select {
	case s.ops <- o:
	case <-s.quit:
		return fmt.Errorf("%s: %w", op, errClosed)
	case <-ctx.Done():
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

// commitDelay bounds how long a held write (a task's snapshot) waits for
// its commit while the transaction holds staged tasks that have not ended
// yet: under load their ends follow within it, and one commit stores them
// all instead of one commit each. A write that is not held (a sync, whatever
// a reader waits for) commits the transaction at once, and so do the ends
// of every staged task.
const commitDelay = time.Millisecond

// txState is the writer's open transaction.
type txState struct {
	open     bool                // a transaction is open
	waiting  []*writeOp          // the writes answered at its commit
	werrs    []error             // their own errors
	urgent   bool                // a waiting write is not held
	since    time.Time           // when the first of them ran
	unended  map[string]struct{} // the tasks staged in it that have not ended
	delay    *time.Timer         // the commit delay of its held writes
	delaySet bool                // delay runs
}

// writer runs the queued writes until the store closes.
func (s *Store) writer() {
	defer close(s.writerDone)
	batch := make([]*writeOp, 0, maxBatch)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	st := &txState{unended: map[string]struct{}{}, delay: time.NewTimer(time.Hour)}
	st.delay.Stop()
	for {
		var delayed <-chan time.Time
		if st.delaySet {
			delayed = st.delay.C
		}
		select {
		case o := <-s.ops:
			batch = append(batch[:0], o)
		case <-linger.C:
			s.commit(st)
			continue
		case <-delayed:
			st.delaySet = false
			s.commit(st)
			continue
		case <-s.quit:
			s.commit(st)
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
		for len(batch) > 0 {
			if batch[0].alone {
				s.commit(st)
				batch[0].done <- batch[0].fn(&wtx{s: s})
				batch = batch[1:]
				continue
			}
			n := 1
			for n < len(batch) && !batch[n].alone {
				n++
			}
			was := st.open
			s.run(batch[:n], st)
			if st.open && !was {
				linger.Reset(s.opts.stageLinger)
			}
			batch = batch[n:]
		}
		if len(st.waiting) == 0 {
			continue
		}
		if left := s.opts.commitDelay - time.Since(st.since); st.urgent || len(st.unended) == 0 || len(st.waiting) >= maxBatch || left <= 0 {
			s.commit(st)
		} else if !st.delaySet {
			st.delay.Reset(left)
			st.delaySet = true
			if s.opts.onHold != nil {
				s.opts.onHold()
			}
		}
	}
}

// run runs writes in the open transaction (begun if there is none) and
// answers the staged ones; the others wait for the commit (st.waiting).
func (s *Store) run(batch []*writeOp, st *txState) {
	w := &wtx{s: s}
	// fresh: the transaction holds no write yet, so the next write needs no
	// savepoint: one that fails rolls the whole transaction back, and a new
	// one begins for the writes after it.
	fresh := !st.open
	if !st.open {
		if _, err := w.ExecContext(ctxBG, `BEGIN IMMEDIATE`); err != nil {
			for _, o := range batch {
				o.done <- s.unavailable(o.op, err)
			}
			return
		}
		st.open = true
	}
	for i, o := range batch {
		var err error
		if fresh {
			fresh = false
			if err = o.fn(w); err != nil {
				if _, rerr := w.ExecContext(ctxBG, `ROLLBACK`); rerr != nil {
					s.abort(st, batch[i:], rerr)
					return
				}
				st.open = false
				o.done <- err
				if i+1 == len(batch) {
					return
				}
				if _, err := w.ExecContext(ctxBG, `BEGIN IMMEDIATE`); err != nil {
					for _, o := range batch[i+1:] {
						o.done <- s.unavailable(o.op, err)
					}
					return
				}
				st.open = true
				fresh = true
				continue
			}
		} else {
			if _, rerr := w.ExecContext(ctxBG, `SAVEPOINT w`); rerr != nil {
				s.abort(st, batch[i:], rerr)
				return
			}
			if err = o.fn(w); err != nil {
				if _, rerr := w.ExecContext(ctxBG, `ROLLBACK TO w`); rerr != nil {
					s.abort(st, batch[i:], rerr)
					return
				}
			}
			if _, rerr := w.ExecContext(ctxBG, `RELEASE w`); rerr != nil {
				s.abort(st, batch[i:], rerr)
				return
			}
		}
		if err == nil && o.task != "" {
			if o.stage {
				st.unended[o.task] = struct{}{}
			} else if o.ends {
				delete(st.unended, o.task)
			}
		}
		if !o.stage {
			if len(st.waiting) == 0 {
				st.since = time.Now()
			}
			st.waiting, st.werrs = append(st.waiting, o), append(st.werrs, err)
			st.urgent = st.urgent || !o.hold
			continue
		}
		if err == nil {
			// Before the answer: a read that follows it syncs.
			s.staged.Store(true)
		}
		o.done <- err
	}
}

// abort rolls the open transaction back after a failure of the database:
// every write not yet answered fails.
func (s *Store) abort(st *txState, rest []*writeOp, err error) {
	(&wtx{s: s}).ExecContext(ctxBG, `ROLLBACK`)
	if s.staged.Swap(false) {
		s.opts.Log.Error("task store: staged writes lost", "err", err)
	}
	for _, o := range append(st.waiting, rest...) {
		o.done <- s.unavailable(o.op, err)
	}
	s.reset(st)
}

// reset forgets the transaction that ended.
func (s *Store) reset(st *txState) {
	st.open, st.urgent = false, false
	if st.delaySet {
		st.delay.Stop()
		st.delaySet = false
	}
	clear(st.waiting)
	st.waiting, st.werrs = st.waiting[:0], st.werrs[:0]
	clear(st.unended)
}

// commit commits the open transaction, if there is one, and answers the
// writes that waited for it; a commit that fails rolls it back (the staged
// writes are lost, and the tasks' next writes fail).
func (s *Store) commit(st *txState) {
	if !st.open {
		return
	}
	w := &wtx{s: s}
	_, err := w.ExecContext(ctxBG, `COMMIT`)
	if err != nil {
		w.ExecContext(ctxBG, `ROLLBACK`)
		s.opts.Log.Error("task store: commit failed", "err", err)
	}
	s.staged.Store(false)
	s.commits.Add(1)
	for i, o := range st.waiting {
		if err != nil {
			o.done <- s.unavailable(o.op, err)
			continue
		}
		o.done <- st.werrs[i]
	}
	s.reset(st)
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
const checkpointInterval = 250 * time.Millisecond

// checkpointer runs a passive checkpoint (it never waits for the writer or
// the readers) every checkpointInterval until the store closes; the writer's
// next transaction after a complete one starts the WAL over.
func (s *Store) checkpointer() {
	defer close(s.checkpointerDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if _, err := s.ck.ExecContext(ctxBG, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
				s.opts.Log.Warn("task store: checkpoint failed", "err", err)
			}
		case <-s.quit:
			return
		}
	}
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
