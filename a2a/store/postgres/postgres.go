// Package postgres is agentd's task store for several replicas on one
// PostgreSQL database, through pgx. It implements tasks.Store,
// tasks.Durable, tasks.PushJournal, tasks.Shared and the supervisor's
// distillate store, and passes the conformance suite of tasks/storetest.
//
// Each Store is an instance (a replica) that holds a lease: a row of the
// leases table whose heartbeat it renews every LeaseTTL/3. A task whose
// runner's heartbeat is older than LeaseTTL is an orphan, which any replica
// claims (one wins) and resolves by the recovery policy. Changes of tasks
// reach the other replicas that watch them through LISTEN/NOTIFY (a trigger
// announces, at commit, every new snapshot of a task some replica watches:
// Watch), and so do cancel requests for a task another replica runs: no
// broker besides the database.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/a2a/tasks"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// schema is the embedded migrations: the database's schema version is how
// many of them have been applied.
var schema = store.EmbeddedSchema(migrationFS)

// migrations are the schema's versions in order, read on first use.
var migrations = schema.Texts

// SchemaVersion is the schema version this build writes and reads.
var SchemaVersion = schema.Version

// countShardParam is the run-time parameter naming the shard of task_count
// a connection counts its changes in, one of countShards.
const (
	countShardParam = "agentd.count_shard"
	countShards     = 64
)

// DefaultLeaseTTL is how long a replica's lease lasts without a heartbeat.
const DefaultLeaseTTL = 15 * time.Second

// Options configure a Store. The zero value of a field is its default.
type Options struct {
	// Capacity and Retention bound the tasks held, as the embedded store's
	// (default 10000; 0 keeps finished tasks until capacity evicts them).
	Capacity  int
	Retention time.Duration
	// AuditKeep and AuditMaxAge bound the audit trail of operator actions
	// (tasks.Auditor): at most AuditKeep records, none older than
	// AuditMaxAge; default tasks.DefaultAuditKeep and
	// tasks.DefaultAuditMaxAge.
	AuditKeep   int
	AuditMaxAge time.Duration
	// Bytes bounds the bytes of the tasks' snapshots and retained payloads
	// (0: no byte bound; a running task's payload, which repeats its
	// message, counts once beside its snapshot: the larger of the two; a
	// task's end drops it); QuotaTasks and QuotaBytes bound one caller's (0:
	// the store's bounds, no quota of its own). Finished tasks make room as
	// the memory and embedded stores' policy says, in the creating
	// transaction (agentd_make_room, migrations 4 and 7): a caller's new
	// task evicts that caller's own oldest finished tasks first, then the
	// oldest finished tasks of callers over their fair share (anyone's
	// without a quota); a new task is refused with tasks.ErrCallerQuota when its
	// caller's quota holds only running tasks, and with tasks.ErrStoreFull
	// when nothing may go. A task that grows is never refused. A caller's
	// creates, from every replica, are serialized by an advisory lock, so
	// its quota holds exactly; the store's bounds may be passed by the
	// creates in flight at once.
	Bytes      int64
	QuotaTasks int
	QuotaBytes int64
	// Now is the clock of retention and eviction; default time.Now. Leases
	// use the database's clock, which every replica shares.
	Now func() time.Time
	// LeaseTTL is how long this replica's tasks stay its own without a
	// heartbeat; default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Instance is this replica's runner id; default a new UUIDv7.
	Instance string
	Log      *slog.Logger

	// tracer, when set, sees every statement of the store's connections
	// (the tests count round trips with it).
	tracer pgx.QueryTracer
}

// Store is one replica's handle on the database. It is safe for concurrent
// use; create it with Open and release it with Close.
type Store struct {
	pool     *pgxpool.Pool
	cfg      *pgxpool.Config
	opts     Options
	instance string
	where    string // the DSN without its password, for messages

	stop    context.CancelFunc
	wg      sync.WaitGroup
	closed  atomic.Bool
	expired atomic.Int64 // the store's clock at the last deletion of expired tasks
	// unflushed counts the creates committed without waiting for the WAL
	// flush, flushed how many of them are known flushed (Sync).
	unflushed, flushed atomic.Int64
	mu                 sync.Mutex // guards watchers
	watch              map[a2a.TaskID]map[chan struct{}]struct{}
	cancels            chan a2a.TaskID

	pushes      chan a2a.TaskID // tasks that got a webhook (PushRegistered)
	pushLost    atomic.Bool     // an announcement was dropped: "" is owed on pushes
	forwards    chan a2a.TaskID // tasks a message was forwarded to (Forwarded; forward.go)
	forwardLost atomic.Bool     // an announcement was dropped: "" is owed on forwards
	wq          writeQueue      // the writes of the writers (writer.go)
	queueWake   chan struct{}   // the shared queue changed (queue.go)
	// queueGen counts the queue's announcements; ClaimQueued found the
	// queue empty at announcement emptyGen, at emptyAt (unix ns) (queue.go).
	queueGen, emptyGen, emptyAt atomic.Int64
	takenOver                   chan a2a.TaskID // this replica's tasks another took over (fence.go)
	fence                       fenceState      // guarded by the heartbeat goroutine alone
	contact                     *contact        // whether this replica may judge others' leases (contact.go)
}

var (
	_ tasks.Store       = (*Store)(nil)
	_ tasks.Durable     = (*Store)(nil)
	_ tasks.PushJournal = (*Store)(nil)
	_ tasks.Shared      = (*Store)(nil)
	_ tasks.PushWatcher = (*Store)(nil)
)

// ErrUnreachable wraps the error of a database that cannot be used at
// Open: it cannot be reached, refuses the login, or cannot be written.
var ErrUnreachable = errors.New("postgres: the database cannot be used")

// Open connects to the database of dsn, migrates its schema to
// SchemaVersion (a schema a newer agentd wrote is refused with a
// *store.SchemaError and left as it is), takes this replica's lease and
// starts listening for the other replicas' notifications.
func Open(ctx context.Context, dsn string, o Options) (*Store, error) {
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
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Instance == "" {
		o.Instance = uuid.Must(uuid.NewV7()).String()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: the DSN does not parse: %v", ErrUnreachable, redact(err))
	}
	cfg.MaxConns = max(cfg.MaxConns, 16)
	// Every connection names this replica: the database fences its writes
	// to tasks another replica took over (fence.go).
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams[instanceParam] = o.Instance
	cfg.ConnConfig.RuntimeParams[leaseParam] = fmt.Sprint(o.LeaseTTL.Seconds())
	if o.tracer != nil {
		cfg.ConnConfig.Tracer = o.tracer
	}
	// Each connection counts tasks in a shard of its own (migration 5):
	// from a random one on, so that replicas rarely share one.
	shard := rand.Int64N(countShards)
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.RuntimeParams[countShardParam] = fmt.Sprint(atomic.AddInt64(&shard, 1) % countShards)
		return nil
	}
	s := &Store{cfg: cfg, opts: o, instance: o.Instance, watch: map[a2a.TaskID]map[chan struct{}]struct{}{}, cancels: make(chan a2a.TaskID, 256),
		queueWake: make(chan struct{}, 1), takenOver: make(chan a2a.TaskID, 256), pushes: make(chan a2a.TaskID, 256), forwards: make(chan a2a.TaskID, 256),
		wq:    writeQueue{wake: make(chan struct{}, 1)},
		where: fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)}
	openCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if s.pool, err = pgxpool.NewWithConfig(openCtx, cfg); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, s.where, redact(err))
	}
	if err := s.pool.Ping(openCtx); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, s.where, redact(err))
	}
	if err := s.migrate(openCtx); err != nil {
		s.pool.Close()
		return nil, err
	}
	if _, err := s.pool.Exec(openCtx, `INSERT INTO leases (instance, heartbeat, started) VALUES ($1, now(), now())`, s.instance); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("%w: %s: take the lease: %v", ErrUnreachable, s.where, err)
	}
	s.contact = newContact(o.LeaseTTL)
	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	ready := make(chan error, 1)
	s.wg.Add(2 + writers)
	go s.heartbeat(bg)
	go s.listen(bg, ready)
	for range writers {
		go s.writer(bg)
	}
	if err := <-ready; err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: %s: listen: %v", ErrUnreachable, s.where, err)
	}
	return s, nil
}

// redact drops what a connection error may quote of the DSN's password.
func redact(err error) error {
	var pe *pgconn.ConnectError
	if errors.As(err, &pe) {
		return errors.New(pe.Unwrap().Error())
	}
	return err
}

// migrate applies the missing migrations under an advisory lock (replicas
// starting at once migrate one after the other).
func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, s.where, err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7422016)`); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, s.where, err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS agentd_schema (version int NOT NULL)`); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, s.where, err)
	}
	v := 0
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM agentd_schema`).Scan(&v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, s.where, err)
	}
	if v > SchemaVersion {
		return &store.SchemaError{Where: s.where, Found: v, Max: SchemaVersion}
	}
	for i := v; i < SchemaVersion; i++ {
		if _, err := tx.Exec(ctx, migrations()[i]); err != nil {
			return fmt.Errorf("postgres: migrate %s to schema version %d: %w", s.where, i+1, err)
		}
	}
	if v < SchemaVersion {
		if _, err := tx.Exec(ctx, `DELETE FROM agentd_schema; INSERT INTO agentd_schema VALUES (`+fmt.Sprint(SchemaVersion)+`)`); err != nil {
			return fmt.Errorf("postgres: migrate %s: %w", s.where, err)
		}
		s.opts.Log.Info("task store schema migrated", "where", s.where, "from", v, "to", SchemaVersion)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnreachable, s.where, err)
	}
	return nil
}

// Where returns the database, without the DSN's password.
func (s *Store) Where() string { return s.where }

// Instance implements tasks.Durable.
func (s *Store) Instance() string { return s.instance }

// LeaseTTL returns how long this replica's lease lasts without a heartbeat.
func (s *Store) LeaseTTL() time.Duration { return s.opts.LeaseTTL }

// Close gives up the lease (this replica's unfinished tasks are orphans at
// once), stops listening and closes the pool.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := s.pool.Exec(ctx, `WITH w AS (DELETE FROM task_watchers WHERE instance = $1) DELETE FROM leases WHERE instance = $1`, s.instance)
	s.pool.Close()
	s.mu.Lock()
	for _, set := range s.watch {
		for ch := range set {
			close(ch)
		}
	}
	s.watch = map[a2a.TaskID]map[chan struct{}]struct{}{}
	s.mu.Unlock()
	close(s.cancels)
	close(s.queueWake)
	close(s.takenOver)
	close(s.pushes)
	close(s.forwards)
	if err != nil {
		return fmt.Errorf("postgres: give up the lease: %w", err)
	}
	return nil
}

// heartbeat renews the lease every LeaseTTL/3 until ctx ends; a renewal
// that failed is tried again after a third of that, so that the lease is
// renewed soon after the database comes back (contact.go).
func (s *Store) heartbeat(ctx context.Context) {
	defer s.wg.Done()
	every := s.opts.LeaseTTL / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		hctx, cancel := context.WithTimeout(ctx, every)
		err := s.renew(hctx)
		next := every // from the start of this round
		switch {
		case err != nil && ctx.Err() == nil:
			if s.contact.failed() {
				s.opts.Log.Warn("lease not renewed: other replicas take this one's tasks if it is not renewed within the lease; this one judges none of theirs until the database is back", "instance", s.instance, "err", err)
			}
			next = every / 3 // renewed soon after the database is back (contact.go)
		case err == nil:
			if gap := s.contact.renewed(); gap > 0 {
				s.opts.Log.Info("lease renewed after a break: judging no other replica's lease for a lease, while they renew theirs",
					"instance", s.instance, "unrenewed", gap.Round(time.Millisecond).String(), "lease", s.opts.LeaseTTL.String())
			}
			if err := s.sweepWatchers(hctx); err != nil && ctx.Err() == nil {
				s.opts.Log.Warn("dead replicas' task watches not deleted", "err", err)
			}
		}
		cancel()
		t.Reset(max(next-time.Since(start), 0))
	}
}

// listen keeps one connection LISTENing for task changes and cancel
// requests, reconnecting when it drops (and then waking every watcher, who
// may have missed a change). It reports on ready once it first listens.
func (s *Store) listen(ctx context.Context, ready chan<- error) {
	defer s.wg.Done()
	wait := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, s.cfg.ConnConfig)
		if err == nil {
			_, err = conn.Exec(ctx, `LISTEN agentd_task; LISTEN agentd_cancel; LISTEN agentd_queue; LISTEN agentd_push; LISTEN agentd_forward`)
		}
		if err != nil {
			if conn != nil {
				conn.Close(context.Background())
			}
			if first {
				ready <- err
				return
			}
			if ctx.Err() == nil {
				s.opts.Log.Warn("task notifications lost: reconnecting", "err", err, "retry_in", wait.String())
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 5*time.Second)
			continue
		}
		if first {
			ready <- nil
			first = false
		} else {
			s.wakeAll()
			s.wakeQueue()
			s.pushLost.Store(true) // announcements may have been missed
			s.announcePush("")
			s.forwardLost.Store(true)
			s.announceForward("")
		}
		wait = 100 * time.Millisecond
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				break
			}
			switch n.Channel {
			case "agentd_task":
				s.wake(a2a.TaskID(n.Payload))
			case "agentd_queue":
				s.wakeQueue()
			case "agentd_push":
				s.announcePush(a2a.TaskID(n.Payload))
			case "agentd_forward":
				s.announceForward(a2a.TaskID(n.Payload))
			case "agentd_cancel":
				select {
				case s.cancels <- a2a.TaskID(n.Payload):
				case <-ctx.Done():
				}
			}
		}
		conn.Close(context.Background())
	}
}

func (s *Store) wake(id a2a.TaskID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.watch[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *Store) wakeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, set := range s.watch {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Watch implements tasks.Shared. The watch is registered in the database
// (a row of task_watchers, migration 0006) before Watch returns, so that the
// task's writes announce themselves (they announce nothing to no one
// otherwise): the row commits in a transaction that locks the task's row
// (FOR SHARE), so that a write that held the row before has committed once
// Watch returns (a read after it sees the write), and one that takes the row
// after sees the watcher and announces itself. A watch that cannot be
// registered (the database is unreachable) wakes its reader every
// watchPoll instead. The row is deleted when ctx ends.
func (s *Store) Watch(ctx context.Context, id a2a.TaskID) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		close(ch)
		return ch
	}
	set := s.watch[id]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		s.watch[id] = set
	}
	set[ch] = struct{}{}
	s.mu.Unlock()
	wid := uuid.NewString()
	registered := s.registerWatch(ctx, wid, id)
	if registered != nil && ctx.Err() == nil {
		s.opts.Log.Warn("task watch not registered: polling", "task_id", string(id), "err", registered, "every", watchPoll.String())
	}
	go func() {
		if registered != nil {
			t := time.NewTicker(watchPoll)
			defer t.Stop()
		poll:
			for {
				select {
				case <-ctx.Done():
					break poll
				case <-t.C:
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			}
		}
		<-ctx.Done()
		s.mu.Lock()
		if set, ok := s.watch[id]; ok {
			if _, ok := set[ch]; ok {
				delete(set, ch)
				close(ch)
				if len(set) == 0 {
					delete(s.watch, id)
				}
			}
		}
		s.mu.Unlock()
		if registered == nil && !s.closed.Load() {
			dctx, cancel := context.WithTimeout(context.Background(), s.opts.LeaseTTL/3)
			defer cancel()
			if _, err := s.pool.Exec(dctx, `DELETE FROM task_watchers WHERE id = $1`, wid); err != nil && !s.closed.Load() {
				s.opts.Log.Warn("task watch not deregistered: the task's writes announce themselves until the row goes", "task_id", string(id), "err", err)
			}
		}
	}()
	return ch
}

// watchPoll is how often a watch that could not be registered wakes its
// reader.
const watchPoll = 100 * time.Millisecond

// registerWatch commits watch wid of task id (Watch's comment), with the
// task's row locked in the same transaction.
func (s *Store) registerWatch(ctx context.Context, wid string, id a2a.TaskID) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO task_watchers (id, task_id, instance) VALUES ($1, $2, $3)`, wid, string(id), s.instance)
	b.Queue(`SELECT 1 FROM tasks WHERE id = $1 FOR SHARE`, string(id))
	return s.pool.SendBatch(ctx, b).Close()
}

// sweepWatchers deletes the watches of replicas whose lease expired.
func (s *Store) sweepWatchers(ctx context.Context) error {
	if !s.contact.mayJudge() {
		return nil
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM task_watchers w WHERE w.instance <> $1 AND `+fmt.Sprintf(deadRunner, "w.instance", "$2"),
		s.instance, s.opts.LeaseTTL.Seconds())
	return err
}

// PushRegistered implements tasks.PushWatcher.
func (s *Store) PushRegistered() <-chan a2a.TaskID { return s.pushes }

// announcePush delivers a task's new webhook on pushes (id "": some may
// have been missed). The listener never waits for a reader: an
// announcement that finds the channel full is dropped, and an empty id is
// owed, delivered before the next one.
func (s *Store) announcePush(id a2a.TaskID) {
	if s.pushLost.Load() {
		select {
		case s.pushes <- "":
			s.pushLost.Store(false)
		default:
			return
		}
		if id == "" {
			return
		}
	}
	select {
	case s.pushes <- id:
	default:
		s.pushLost.Store(true)
	}
}

// RequestCancel implements tasks.Shared.
func (s *Store) RequestCancel(ctx context.Context, id a2a.TaskID) error {
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify('agentd_cancel', $1)`, string(id)); err != nil {
		return s.unavailable("request cancel", err)
	}
	return nil
}

// Cancels implements tasks.Shared.
func (s *Store) Cancels() <-chan a2a.TaskID { return s.cancels }

// errClosed is the answer of a closed store.
var errClosed = errors.New("postgres: the store is closed")

// unavailable wraps a database error with the operation: the store is
// unavailable (tasks.ErrStoreUnavailable), unless it was closed, or the
// database refused text it cannot hold (a2a.ErrInvalidParams: the input's
// fault, not an outage; the store checks such text first, tasks.Storable).
func (s *Store) unavailable(op string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", op, errClosed)
	}
	if f := fenced(err); f != nil {
		return fmt.Errorf("%s: %w", op, f)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == badTextCode || pe.Code == untranslatableCode) {
		return fmt.Errorf("%s: %w: %s", op, a2a.ErrInvalidParams, pe.Message)
	}
	return store.Unavailable(op, err)
}

// The SQLSTATEs of text the database cannot hold: a NUL byte or invalid
// UTF-8 (character_not_in_repertoire), a character the encoding lacks.
const (
	badTextCode        = "22021"
	untranslatableCode = "22P05"
)

func (s *Store) now() int64 { return s.opts.Now().UnixNano() }

func (s *Store) cutoff() int64 {
	if s.opts.Retention <= 0 {
		return -1 << 63
	}
	return s.now() - int64(s.opts.Retention)
}

// isUnique reports whether err is a unique-key violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
