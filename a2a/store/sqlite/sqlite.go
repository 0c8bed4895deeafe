// Package sqlite is agentd's embedded durable task store: one SQLite database
// in WAL mode in the state directory (FileName), through the pure-Go driver
// modernc.org/sqlite (no cgo: the image is static). It implements
// tasks.Store, tasks.Durable, tasks.PushJournal and the supervisor's
// distillate store, and passes the conformance suite of tasks/storetest.
//
// Several processes may open one state directory at once (`agentd serve` and
// an `agentd run --run-id`, or two services): SQLite serialises their writes.
// Each open Store is an instance that holds an flock on its own file in the
// instances folder for as long as it lives; the kernel drops the lock when
// the process dies, however it dies, so another instance knows at once which
// unfinished tasks were left by a process that is gone (Orphans).
//
// Durability: every write is one transaction, committed before the method
// returns. With synchronous=NORMAL in WAL mode a committed write survives the
// process being killed; an operating-system crash or power loss may lose the
// last transactions before a checkpoint, never corrupt the database.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/a2a/tasks"
)

// FileName is the database's file in the state directory.
const FileName = "agentd.db"

// instancesDir is the folder of the instances' lock files.
const instancesDir = "instances"

//go:embed migrations/*.sql
var migrationFS embed.FS

// schema is the embedded migrations: the database's schema version is how
// many of them have been applied.
var schema = store.EmbeddedSchema(migrationFS)

// migrations are the schema's versions in order, read on first use.
var migrations = schema.Texts

// SchemaVersion is the schema version this build writes and reads.
var SchemaVersion = schema.Version

// Options configure a Store. The zero value of a field is its default.
type Options struct {
	// Capacity bounds the tasks held, and Bytes the bytes of their
	// snapshots and retained payloads (0: no byte bound; a running task's
	// payload, which repeats its message, counts once beside its snapshot:
	// the larger of the two; a task's end drops it); QuotaTasks and
	// QuotaBytes bound one caller's (0: the store's bounds, no quota of its
	// own). Finished tasks make room as the memory store's policy says
	// (package internal/budget): a caller's new task evicts that caller's
	// own oldest finished tasks first, then the oldest finished tasks of
	// callers over their fair share (anyone's without a quota); a new task is
	// refused with tasks.ErrCallerQuota when its caller's quota holds only
	// running tasks, and with tasks.ErrStoreFull when nothing may go. A
	// task that grows is never refused. Default Capacity 10000.
	Capacity   int
	Bytes      int64
	QuotaTasks int
	QuotaBytes int64
	// Retention is how long a finished task stays; 0 keeps it until
	// Capacity pushes it out.
	Retention time.Duration
	// AuditKeep and AuditMaxAge bound the audit trail of operator actions
	// (tasks.Auditor): at most AuditKeep records, none older than
	// AuditMaxAge; default tasks.DefaultAuditKeep and
	// tasks.DefaultAuditMaxAge.
	AuditKeep   int
	AuditMaxAge time.Duration
	// Now is the store's clock (retention, eviction order); default
	// time.Now.
	Now func() time.Time
	// Log receives the store's own log; nil discards it.
	Log *slog.Logger
}

// Store is the embedded store of one state directory. It is safe for
// concurrent use; create it with Open and release it with Close.
type Store struct {
	dir      string
	path     string
	w        *sql.DB   // one connection: the writer's
	wc       *sql.Conn // that connection, the writer goroutine's (writer.go)
	ck       *sql.DB   // the checkpointer's connection
	started  bool      // the writer and the checkpointer run (set by Open)
	r        *sql.DB   // readers (WAL: they never wait for the writer)
	opts     Options
	instance string
	lock     *os.File // flock held for the store's life: this instance lives
	closed   atomic.Bool
	expired  atomic.Int64 // the store's clock at the last deletion of expired tasks

	get *sql.Stmt // the reader's statement of every task
	rs  readStmts // the readers' other statements

	// wmu is held by whoever runs writes on the writer's connection: the
	// writer, or a caller running its own write (writer.go).
	wmu     sync.Mutex
	open    bool         // a transaction with staged writes is open; wmu guards it
	wclosed bool         // the writer has ended; wmu guards it
	pending atomic.Int64 // the writes queued for the writer or in its hands
	solo    atomic.Bool  // the writes come one at a time: a committing one may run on its caller's goroutine (writer.go)
	linger  *time.Timer  // commits the staged writes (stageLinger)

	stmts      stmts         // the writer's prepared statements
	staged     atomic.Bool   // the writer's open transaction holds staged writes
	stagedIDs  []string      // the tasks those staged writes create; wmu guards it
	lost       lostCreations // staged creations whose commit failed (SyncTask)
	ops        chan *writeOp // the writes queued for the writer (writer.go)
	quit       chan struct{} // closed by Close
	writerDone chan struct{} // closed when the writer has returned

	checkpointerDone chan struct{} // closed when the checkpointer has returned
}

// getSQL is the reader's statement prepared at Open.
const getSQL = `SELECT owner, snapshot FROM tasks WHERE id = ? AND (finished_ns IS NULL OR finished_ns > ?)`

// errClosed is the answer of a closed store.
var errClosed = errors.New("sqlite: the store is closed")

// unavailable wraps a database error with the operation: the store is
// unavailable (tasks.ErrStoreUnavailable), unless it was closed.
//
// A database whose pages are damaged (SQLITE_CORRUPT, SQLITE_NOTADB) is the
// state directory's error too (ErrStateDir, naming the file): no retry
// mends it, and a start that meets it is bad config.
func (s *Store) unavailable(op string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", op, errClosed)
	}
	if isDamaged(err) {
		return fmt.Errorf("%w: %s is damaged: %w", ErrStateDir, s.path, store.Unavailable(op, err))
	}
	return store.Unavailable(op, err)
}

// stateDirErr is the state directory's error of a failure to open or
// migrate the database: ErrStateDir naming the file, and saying it is
// damaged when SQLite found it so (its schema's pages, say, which a start
// reads before any task).
func (s *Store) stateDirErr(err error) error {
	if isDamaged(err) {
		return fmt.Errorf("%w: %s is damaged: %v", ErrStateDir, s.path, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrStateDir, s.path, err)
}

// isDamaged reports whether err is SQLite's finding that the database file
// is damaged or not a database.
func isDamaged(err error) bool {
	var se *sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code() & 0xff
	return c == sqlite3lib.SQLITE_CORRUPT || c == sqlite3lib.SQLITE_NOTADB
}

var (
	_ tasks.Store       = (*Store)(nil)
	_ tasks.Durable     = (*Store)(nil)
	_ tasks.PushJournal = (*Store)(nil)
	_ tasks.TaskSyncer  = (*Store)(nil)
)

// ErrStateDir wraps every error of a state directory that cannot be used:
// it cannot be created or written, or its database cannot be opened or is
// damaged.
var ErrStateDir = errors.New("sqlite: the state directory cannot be used")

// Open opens the store in dir (creating dir, mode 0700, and the database,
// 0600, when they do not exist; tightening them when they are open to
// others: private) and migrates its schema to SchemaVersion. A database
// written by a newer agentd is refused with a *store.SchemaError and left
// as it is; a directory that cannot be written is an error wrapping
// ErrStateDir.
func Open(ctx context.Context, dir string, o Options) (*Store, error) {
	if o.Capacity <= 0 {
		o.Capacity = 10000
	}
	if o.Bytes <= 0 {
		o.Bytes = math.MaxInt64
	}
	if o.QuotaTasks <= 0 || o.QuotaTasks > o.Capacity {
		o.QuotaTasks = o.Capacity
	}
	if o.QuotaBytes <= 0 || o.QuotaBytes > o.Bytes {
		o.QuotaBytes = o.Bytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	useFdatasync()
	if strings.ContainsAny(dir, "?#") {
		return nil, fmt.Errorf("%w: %s: the path may not hold ? or #", ErrStateDir, dir)
	}
	if err := os.MkdirAll(filepath.Join(dir, instancesDir), 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStateDir, err)
	}
	if err := private(dir, o.Log); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStateDir, err)
	}
	s := &Store{dir: dir, path: filepath.Join(dir, FileName), opts: o, instance: uuid.Must(uuid.NewV7()).String(),
		ops: make(chan *writeOp, maxBatch), quit: make(chan struct{}), writerDone: make(chan struct{}), checkpointerDone: make(chan struct{})}
	var err error
	if s.lock, err = lockInstance(dir, s.instance); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStateDir, err)
	}
	fail := func(err error) (*Store, error) {
		s.Close()
		return nil, err
	}
	pragmas := "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"
	// The writer never checkpoints (a checkpoint's fsyncs would hold up the
	// writes queued behind it): the checkpointer does, beside it.
	if s.w, err = sql.Open("sqlite", s.path+pragmas+cacheSize(writerCacheKiB)+"&_pragma=wal_autocheckpoint(0)&_txlock=immediate"); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrStateDir, err))
	}
	s.w.SetMaxOpenConns(1)
	s.w.SetConnMaxIdleTime(0)
	if err := s.migrate(ctx); err != nil {
		return fail(err)
	}
	if s.r, err = sql.Open("sqlite", s.path+pragmas+cacheSize(readerCacheKiB)+"&_pragma=query_only(1)"); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrStateDir, err))
	}
	s.rs.db = s.r
	s.r.SetMaxOpenConns(4)
	s.r.SetMaxIdleConns(4)
	if err := s.r.PingContext(ctx); err != nil {
		return fail(s.stateDirErr(err))
	}
	if s.get, err = s.r.PrepareContext(ctx, getSQL); err != nil {
		return fail(s.stateDirErr(err))
	}
	if s.wc, err = s.w.Conn(ctx); err != nil {
		return fail(s.stateDirErr(err))
	}
	if s.ck, err = sql.Open("sqlite", s.path+pragmas+cacheSize(checkpointerCacheKiB)); err != nil {
		return fail(fmt.Errorf("%w: %v", ErrStateDir, err))
	}
	s.ck.SetMaxOpenConns(1)
	s.linger = time.NewTimer(time.Hour)
	s.linger.Stop()
	s.started = true
	go s.writer()
	go s.checkpointer()
	return s, nil
}

// private makes the state directory and the database's files readable by
// their owner alone: they hold every task, its webhooks' tokens and the
// callers' names. The directory is made 0700 and the files 0600; one that
// was open to others is tightened, with a warning naming it and its old
// mode (a directory that cannot be tightened, another user's, is refused).
// The database is created 0600 before SQLite opens it, since SQLite
// creates it 0644 and its -wal and -shm files with the database's mode.
func private(dir string, log *slog.Logger) error {
	tighten := func(path string, want os.FileMode) error {
		fi, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if old := fi.Mode().Perm(); old&^want != 0 {
			if err := os.Chmod(path, want); err != nil {
				return fmt.Errorf("%s is open to others (mode %04o) and cannot be made %04o: %w", path, old, want, err)
			}
			log.Warn("state directory open to others: tightened", "path", path, "mode", fmt.Sprintf("%04o", old), "now", fmt.Sprintf("%04o", want))
		}
		return nil
	}
	if err := tighten(dir, 0o700); err != nil {
		return err
	}
	db := filepath.Join(dir, FileName)
	f, err := os.OpenFile(db, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		f.Close()
	case !errors.Is(err, os.ErrExist):
		return err
	}
	for _, path := range []string{db, db + "-wal", db + "-shm"} {
		if err := tighten(path, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// useFdatasync makes SQLite sync with fdatasync(2) instead of fsync(2) in
// this process (where the platform has it): the data and the size, not the
// timestamps, whose journal commit on ext4 is often what an fsync waits
// for; the durability is the same (SQLite's own Linux builds sync so). Its
// syncs are the checkpoints' (two each, one of them while the writer waits
// when the WAL starts over, writer.go) and the WAL's header when it starts
// over.
var useFdatasync = sync.OnceFunc(func() { sqlite3.Fdatasync(true) })

// migrate applies the migrations the database lacks, each in its own
// transaction, and refuses a schema newer than this build's.
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.stateDirErr(err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return s.stateDirErr(err)
	}
	if v > SchemaVersion {
		return &store.SchemaError{Where: s.path, Found: v, Max: SchemaVersion}
	}
	for i := v; i < SchemaVersion; i++ {
		if _, err := tx.ExecContext(ctx, migrations()[i]); err != nil {
			return fmt.Errorf("sqlite: migrate %s to schema version %d: %w", s.path, i+1, err)
		}
	}
	if v < SchemaVersion {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
			return fmt.Errorf("sqlite: migrate %s: %w", s.path, err)
		}
		s.opts.Log.Info("task store schema migrated", "path", s.path, "from", v, "to", SchemaVersion)
	}
	if err := tx.Commit(); err != nil {
		return s.stateDirErr(err)
	}
	return nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Instance implements tasks.Durable: this store's runner id.
func (s *Store) Instance() string { return s.instance }

// Close closes the database and ends this instance: its unfinished tasks
// are orphans from then on.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.quit)
	if s.started {
		<-s.writerDone
		<-s.checkpointerDone
	}
	if s.wc != nil {
		s.stmts.mu.Lock()
		for _, st := range s.stmts.m {
			st.Close()
		}
		s.stmts.m = nil
		s.stmts.mu.Unlock()
		s.wc.Close()
	}
	if s.get != nil {
		s.get.Close()
	}
	s.rs.close()
	var errs []error
	for _, db := range []*sql.DB{s.ck, s.r, s.w} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	if s.lock != nil {
		unlockInstance(s.lock)
		s.lock = nil
	}
	return errors.Join(errs...)
}

// now is the store's clock in the stores' nanoseconds.
func (s *Store) now() int64 { return s.opts.Now().UnixNano() }

// cutoff is the finish time at or before which a finished task has expired
// (math.MinInt64 without a retention).
func (s *Store) cutoff() int64 {
	if s.opts.Retention <= 0 {
		return -1 << 63
	}
	return s.now() - int64(s.opts.Retention)
}

// isConstraint reports whether err is a constraint violation (a unique key).
func isConstraint(err error) bool {
	var se *sqlite3.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3lib.SQLITE_CONSTRAINT
}

// Page cache sizes per connection, in KiB. Each connection's cache fills
// with the pages it touches and keeps them: at 16 MiB each (the writer, four
// readers, the checkpointer: 96 MiB at most), a supervisor holding 200 live
// tasks of 64 KiB messages grew by about 90 KiB a task (docs/performance.md,
// figure 9). A cached page costs twice its size: its 4 KiB and header are
// one allocation of the C heap's 8 KiB class (modernc.org/memory), so at 4
// MiB for the writer and 2 MiB for each reader the caches were most of the
// 10 MiB the supervisor grew by from idle to 50 live tasks of 64 KiB
// messages (the messages' pages written, and read back once when each
// child is given its objective). A reader's lookups are by key; the
// checkpointer copies the WAL into the database through the OS's file
// cache. The writer's cache, at 1 MiB, was full after the first dozen such
// tasks, of their messages' overflow pages, written once and not read
// again by it: 2 MiB of the C heap, most of the store's share of what the
// supervisor grew by from idle to 50 live tasks; at 256 KiB it still holds
// the b-tree pages its batches write. A page not cached is read from the
// OS's file cache: figure 6's sqlite rows and BenchmarkSend showed no loss
// past their noise at these sizes.
const (
	writerCacheKiB       = 256
	readerCacheKiB       = 512
	checkpointerCacheKiB = 256
)

// cacheSize is the DSN parameter of a connection's page cache of kib KiB.
func cacheSize(kib int) string { return fmt.Sprintf("&_pragma=cache_size(-%d)", kib) }
