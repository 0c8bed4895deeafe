package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/a2a/tasks"
)

func notFound(id a2a.TaskID) error { return fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id) }

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// finishedAt is the finish time to store for a snapshot: now once terminal.
func (s *Store) finishedAt(t *a2a.Task) *int64 {
	if t.Status.State.Terminal() {
		n := s.now()
		return &n
	}
	return nil
}

// Create implements tasks.Store. Room is made and the task inserted in one
// round trip with the transaction's start (a pgx batch); an existing id or
// a duplicate message makes the unique keys refuse the insert, and only then
// is the cause looked up. Two replicas that race with one message: one
// insert wins, and the other finds the winner as a duplicate (and its
// evictions are rolled back). Room is made by the store's policy (Options,
// makeRoomSQL): tasks.ErrCallerQuota or tasks.ErrStoreFull when it cannot
// be. Tasks past their retention are deleted at most once a second (reads
// never see them).
func (s *Store) Create(ctx context.Context, t *a2a.Task, owner string) error {
	if err := tasks.CheckNewTask(t, owner); err != nil {
		return err // before the writer's batch, which the database would refuse whole
	}
	snap, err := store.EncodeTask(t)
	if err != nil {
		return err
	}
	key := tasks.MessageKey(t)
	err = s.create(ctx, t, owner, key, snap)
	if !isUnique(err) {
		return err
	}
	if key != "" {
		// The message's task past its retention, which the sweep (once a
		// second) has not deleted yet, is no duplicate: reads no longer
		// see it, so it goes now and the message makes a new task.
		tag, err := s.pool.Exec(ctx, `DELETE FROM tasks WHERE owner = $1 AND message_id = $2 AND finished_ns IS NOT NULL AND finished_ns <= $3`, owner, key, s.cutoff())
		if err != nil {
			return s.unavailable("create task", err)
		}
		if tag.RowsAffected() > 0 {
			if err = s.create(ctx, t, owner, key, snap); !isUnique(err) {
				return err
			}
		}
		var existing string
		switch err := s.pool.QueryRow(ctx, `SELECT id FROM tasks WHERE owner = $1 AND message_id = $2`, owner, key).Scan(&existing); {
		case err == nil:
			return &tasks.DuplicateError{Existing: a2a.TaskID(existing), MessageID: key}
		case !errors.Is(err, pgx.ErrNoRows):
			return s.unavailable("create task", err)
		}
	}
	return fmt.Errorf("postgres: task %s already exists", t.ID)
}

// makeRoomSQL evicts finished tasks for a task (id, owner, size; a size < 0
// is the growth of a stored task) within the store's bounds and the
// caller's quota (migration 0004_budgets.sql).
const makeRoomSQL = `SELECT agentd_make_room($1, $2, $3, $4, $5, $6, $7)`

// The SQLSTATEs agentd_make_room raises.
const (
	quotaCode = "AG002" // the caller's quota holds only running tasks
	fullCode  = "AG003" // the store is full
)

// roomError maps what agentd_make_room raised to the tasks package's
// errors; nil for any other error.
func roomError(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return nil
	}
	switch pe.Code {
	case quotaCode:
		return fmt.Errorf("%w: %s", tasks.ErrCallerQuota, pe.Message)
	case fullCode:
		return tasks.ErrStoreFull
	}
	return nil
}

// makeRoomArgs are makeRoomSQL's arguments.
func (s *Store) makeRoomArgs(owner, id string, size int64) []any {
	o := s.opts
	return []any{owner, id, size, int64(o.Capacity), o.Bytes, int64(o.QuotaTasks), o.QuotaBytes}
}

// create inserts the task through the writer (writer.go): the eviction
// (makeRoomNSQL, once for the creates of one caller in the batch) and the
// insert, in a batch that is one implicit
// transaction, with the expiry of old tasks once a second, and with the
// other writes queued meanwhile. A batch of creates alone commits without
// waiting for the WAL flush (synchronous_commit off, local to it).
//
// Such a commit does not wait for the flush: the task is visible to every
// replica at once, and its unique keys hold, so that no other replica runs
// the same message, but a database crash in the next moments may lose it,
// as a crash of this process would, before anyone is told of it: the engine
// syncs (Sync) before it tells anyone, unless a later write of the task was
// waited for (a Put's commit is flushed, and the WAL with it up to there,
// this insert with it).
func (s *Store) create(ctx context.Context, t *a2a.Task, owner, key string, snap []byte) error {
	// Not cut short by ctx: a create that commits is answered (Create
	// resolves a duplicate from it).
	return s.createResult(s.write(context.WithoutCancel(ctx), s.createOp(t, owner, key, snap)))
}

// createOp is the write of a new task.
func (s *Store) createOp(t *a2a.Task, owner, key string, snap []byte) *writeOp {
	now := s.now()
	return &writeOp{create: true, owner: owner, id: string(t.ID), size: int64(len(snap)),
		queue: func(b *pgx.Batch) {
			b.Queue(`INSERT INTO tasks (id, owner, message_id, context_id, state, updated_ns, created_ns, finished_ns, runner, snapshot, size)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
				string(t.ID), owner, nullable(key), t.ContextID, string(t.Status.State), store.Nanos(tasks.StatusTime(t)), now, s.finishedAt(t), s.instance, snap, len(snap))
		},
		read: func(br pgx.BatchResults) error {
			_, err := br.Exec()
			return err
		}}
}

// makeRoomNSQL makes room for a caller's creates of one batch at once
// (migration 0006_watchers.sql): owner, their ids, their bytes, how many,
// then the bounds as makeRoomSQL's.
const makeRoomNSQL = `SELECT agentd_make_room_n($1, $2, $3, $4, $5, $6, $7, $8)`

// queueMakeRoom queues the room made for creates, a run of one caller's in
// a batch.
func (s *Store) queueMakeRoom(b *pgx.Batch, creates []*writeOp) {
	ids := make([]string, len(creates))
	var size int64
	for i, o := range creates {
		ids[i] = o.id
		size += o.size
	}
	o := s.opts
	b.Queue(makeRoomNSQL, creates[0].owner, ids, size, int64(len(creates)), int64(o.Capacity), o.Bytes, int64(o.QuotaTasks), o.QuotaBytes)
}

// createResult maps a create's error: a unique key's violation as it is
// (Create looks up its cause), no room as the tasks package's errors.
func (s *Store) createResult(err error) error {
	switch {
	case err == nil, isUnique(err):
		return err
	case roomError(err) != nil:
		return roomError(err)
	}
	return s.unavailable("create task", err)
}

// Sync implements tasks.Syncer: once it returns, every task Create stored
// before it is flushed to the WAL.
func (s *Store) Sync(ctx context.Context) error {
	if s.flushed.Load() >= s.unflushed.Load() {
		return nil
	}
	return s.flushWAL(ctx)
}

// unflushedSQL is true while the WAL holds a commit not yet flushed: a
// statement's snapshot sees only commits whose record precedes the insert
// position it reads after, and the flush position is read before it.
//
// A creation commits without waiting for the flush (create) and is visible
// at once to every replica; its own replica syncs before it tells anyone of
// the task, but another replica that reads it (a duplicate send answered
// with it, ListTasks, a stream) would show a task that a crash of
// PostgreSQL could still lose. Such a read flushes first (flushWAL): only a
// read of a running task of another replica's, while the WAL has unflushed
// commits.
const unflushedSQL = `pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn()`

// running reports whether any of ts has not ended.
func running(ts []*a2a.Task) bool {
	for _, t := range ts {
		if !t.Status.State.Terminal() {
			return true
		}
	}
	return false
}

// flushWAL returns once everything committed before it is flushed: a
// synchronous commit of a write (the lease's heartbeat, unchanged), in the
// writer's next batch, flushes the WAL up to it.
func (s *Store) flushWAL(ctx context.Context) error {
	err := s.write(ctx, &writeOp{sync: true,
		queue: func(b *pgx.Batch) {
			b.Queue(`UPDATE leases SET heartbeat = heartbeat WHERE instance = $1`, s.instance)
		},
		read: func(br pgx.BatchResults) error {
			_, err := br.Exec()
			return err
		}})
	if err != nil {
		return s.unavailable("sync", err)
	}
	return nil
}

// markFlushed records that every create counted up to target is flushed.
func (s *Store) markFlushed(target int64) {
	for {
		cur := s.flushed.Load()
		if cur >= target || s.flushed.CompareAndSwap(cur, target) {
			return
		}
	}
}

// Put implements tasks.Store. A snapshot that takes the store over its byte
// bound makes finished tasks go (makeRoomSQL, in the update's transaction);
// it is never refused for it. It is one round trip, a synchronous commit.
func (s *Store) Put(ctx context.Context, t *a2a.Task) error {
	_, err := s.put(ctx, t, false)
	return err
}

// PutEnd implements tasks.EndJournal: Put, and in the same round trip and
// transaction, after the update (which holds the task's row until the
// commit, as a registration does: SetPush), the journal's entry for the
// end's notification if the task has webhooks then (endPendingSQL).
func (s *Store) PutEnd(ctx context.Context, t *a2a.Task) (int64, error) {
	return s.put(ctx, t, true)
}

// endPendingSQL journals a task's end, the snapshot just written, if the
// task has webhooks; an empty event is built from the snapshot by the
// pusher (tasks.EndJournal). A statement of its own: it reads what
// committed once the update had the row (read committed). It returns the
// entry's seq, no row for none (a CTE that always returned one cost
// PostgreSQL 5 to 20 µs more a write than the SELECT EXISTS of before; this
// 0 to 5).
const endPendingSQL = `INSERT INTO push_pending (task_id, runner, snapshot, event, final)
	SELECT t.id, $2, t.snapshot, ''::bytea, true FROM tasks t
	WHERE t.id = $1 AND (t.finished_ns IS NULL OR t.finished_ns > $3) AND EXISTS (SELECT 1 FROM push_configs p WHERE p.task_id = t.id)
	RETURNING seq`

// PutKeeping implements tasks.MessageKeeper: the stored snapshot is read,
// and its first message's bytes copied into t's encoding (store.Kept). The
// task's runner is the only writer of a running task's snapshot (a replica
// that took it over is fenced: Fencing), so none comes between the read
// and the write.
func (s *Store) PutKeeping(ctx context.Context, t *a2a.Task) error {
	if !tasks.Storable(string(t.ID)) {
		return notFound(t.ID)
	}
	k, err := store.EncodeKept(t)
	if err != nil {
		return err
	}
	var stored []byte
	err = s.pool.QueryRow(ctx, `SELECT snapshot FROM tasks WHERE id = $1 AND (finished_ns IS NULL OR finished_ns > $2)`, string(t.ID), s.cutoff()).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound(t.ID)
	}
	if err != nil {
		return s.unavailable("put task", err)
	}
	snap, err := k.KeptIn(stored)
	if err != nil {
		return err
	}
	op, res := s.putOp(t, snap, false)
	_, err = res(s.write(ctx, op))
	return err
}

// KeptMessage implements tasks.MessageKeeper (store.KeptMessage). The task
// is this replica's (its runner's): what it wrote is read.
func (s *Store) KeptMessage(ctx context.Context, id a2a.TaskID, hollow *a2a.Message) (*a2a.Message, error) {
	if !tasks.Storable(string(id)) {
		return nil, notFound(id)
	}
	var snap []byte
	err := s.pool.QueryRow(ctx, `SELECT snapshot FROM tasks WHERE id = $1 AND (finished_ns IS NULL OR finished_ns > $2)`, string(id), s.cutoff()).Scan(&snap)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, s.unavailable("get task", err)
	}
	return store.KeptMessage(snap, hollow)
}

func (s *Store) put(ctx context.Context, t *a2a.Task, end bool) (int64, error) {
	if !tasks.Storable(string(t.ID)) {
		return 0, notFound(t.ID) // no task has such an id (tasks.Storable)
	}
	snap, err := store.EncodeTask(t)
	if err != nil {
		return 0, err
	}
	op, res := s.putOp(t, snap, end)
	return res(s.write(ctx, op))
}

// putOp is the write of a stored task's snapshot; res maps its outcome to
// Put's (and PutEnd's entry).
func (s *Store) putOp(t *a2a.Task, snap []byte, end bool) (op *writeOp, res func(error) (int64, error)) {
	var n, seq int64
	op = &writeOp{sync: true,
		queue: func(b *pgx.Batch) {
			n, seq = 0, 0
			b.Queue(`UPDATE tasks SET state = $1, updated_ns = $2, context_id = $3, snapshot = $4,
				payload = CASE WHEN $5::bigint IS NULL THEN payload END,
				size = CASE WHEN $5::bigint IS NULL THEN GREATEST(octet_length($4::bytea), coalesce(octet_length(payload), 0)) ELSE octet_length($4::bytea) END,
				finished_ns = CASE WHEN $5::bigint IS NULL THEN NULL ELSE coalesce(finished_ns, $5::bigint) END
				WHERE id = $6 AND (finished_ns IS NULL OR finished_ns > $7)`,
				string(t.Status.State), store.Nanos(tasks.StatusTime(t)), t.ContextID, snap, s.finishedAt(t), string(t.ID), s.cutoff())
			if s.opts.Bytes < math.MaxInt64 {
				// In the update's transaction: the eviction commits with
				// it, or neither does.
				b.Queue(makeRoomSQL, s.makeRoomArgs("", string(t.ID), -1)...)
			}
			if end {
				b.Queue(endPendingSQL, string(t.ID), s.instance, s.cutoff())
			}
		},
		read: func(br pgx.BatchResults) error {
			ct, err := br.Exec()
			if err != nil {
				return err
			}
			n = ct.RowsAffected()
			if s.opts.Bytes < math.MaxInt64 {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			if end {
				rows, err := br.Query()
				if err != nil {
					return err
				}
				for rows.Next() {
					if err := rows.Scan(&seq); err != nil {
						rows.Close()
						return err
					}
				}
				rows.Close()
				return rows.Err()
			}
			return nil
		}}
	return op, func(err error) (int64, error) {
		if err != nil {
			return 0, s.unavailable("put task", err)
		}
		if n == 0 {
			return 0, notFound(t.ID)
		}
		return seq, nil
	}
}

// Get implements tasks.Store.
func (s *Store) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, string, error) {
	if !tasks.Storable(string(id)) {
		return nil, "", notFound(id) // no task has such an id (tasks.Storable)
	}
	var owner string
	var snap []byte
	var unflushed bool
	err := s.pool.QueryRow(ctx, `SELECT owner, snapshot, finished_ns IS NULL AND runner <> $3 AND `+unflushedSQL+`
		FROM tasks WHERE id = $1 AND (finished_ns IS NULL OR finished_ns > $2)`,
		string(id), s.cutoff(), s.instance).Scan(&owner, &snap, &unflushed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", notFound(id)
	}
	if err != nil {
		return nil, "", s.unavailable("get task", err)
	}
	if unflushed {
		if err := s.flushWAL(ctx); err != nil {
			return nil, "", err
		}
	}
	t, err := store.DecodeTask(snap)
	if err != nil {
		return nil, "", err
	}
	return t, owner, nil
}

// List implements tasks.Store.
func (s *Store) List(ctx context.Context, q tasks.ListQuery) (tasks.ListPage, error) {
	args := []any{s.cutoff()}
	where := []string{"(finished_ns IS NULL OR finished_ns > $1)"}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if !q.AnyOwner {
		where = append(where, "owner = "+arg(q.Owner))
	}
	if q.ContextID != "" {
		where = append(where, "context_id = "+arg(q.ContextID))
	}
	caller := ""
	if q.Caller != nil {
		caller = *q.Caller
		where = append(where, "owner = "+arg(caller))
	}
	if q.Text != "" {
		// position, not LIKE: the text is data, no character of it a
		// wildcard. Only ASCII letters fold, as in SQLite and memory.
		where = append(where, "position(translate("+arg(q.Text)+", 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') in "+
			"translate(convert_from(snapshot, 'UTF8'), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')) > 0")
	}
	if (!q.AnyOwner && !tasks.Storable(q.Owner)) || !tasks.Storable(q.ContextID) || !tasks.Storable(q.Text) || !tasks.Storable(caller) {
		// No task has such a caller or context (tasks.Storable), and the
		// database refuses the text: none is selected, without it.
		args, where = args[:1], []string{where[0], "false"}
	}
	if q.State != "" {
		where = append(where, "state = "+arg(string(q.State)))
	}
	if !q.UpdatedAfter.IsZero() {
		where = append(where, "updated_ns >= "+arg(store.Nanos(q.UpdatedAfter)))
	}
	if !q.UpdatedBefore.IsZero() {
		where = append(where, "updated_ns < "+arg(store.Nanos(q.UpdatedBefore)))
	}
	cond := strings.Join(where, " AND ")
	countArgs := append([]any(nil), args...)
	pageCond := cond
	if q.PageToken != "" {
		at, id, err := tasks.ParsePageToken(q.PageToken)
		if err != nil {
			return tasks.ListPage{}, err
		}
		ns := arg(store.Nanos(at))
		pageCond += fmt.Sprintf(" AND (updated_ns < %s OR (updated_ns = %s AND id < %s))", ns, ns, arg(string(id)))
	}
	limit := arg(q.PageSize + 1)
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return tasks.ListPage{}, s.unavailable("list tasks", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	page := tasks.ListPage{PageSize: q.PageSize}
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM tasks WHERE "+cond, countArgs...).Scan(&page.TotalSize); err != nil {
		return tasks.ListPage{}, s.unavailable("list tasks", err)
	}
	rows, err := tx.Query(ctx, "SELECT snapshot FROM tasks WHERE "+pageCond+" ORDER BY updated_ns DESC, id DESC LIMIT "+limit, args...)
	if err != nil {
		return tasks.ListPage{}, s.unavailable("list tasks", err)
	}
	defer rows.Close()
	more := false
	for rows.Next() {
		if len(page.Tasks) == q.PageSize {
			more = true
			break
		}
		var snap []byte
		if err := rows.Scan(&snap); err != nil {
			return tasks.ListPage{}, s.unavailable("list tasks", err)
		}
		t, err := store.DecodeTask(snap)
		if err != nil {
			return tasks.ListPage{}, err
		}
		page.Tasks = append(page.Tasks, tasks.TrimHistory(t, q.HistoryLength))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return tasks.ListPage{}, s.unavailable("list tasks", err)
	}
	if running(page.Tasks) {
		var unflushed bool
		if err := tx.QueryRow(ctx, "SELECT "+unflushedSQL).Scan(&unflushed); err != nil {
			return tasks.ListPage{}, s.unavailable("list tasks", err)
		}
		if unflushed {
			if err := s.flushWAL(ctx); err != nil {
				return tasks.ListPage{}, err
			}
		}
	}
	if more {
		last := page.Tasks[len(page.Tasks)-1]
		page.NextPageToken = tasks.PageToken(time.Unix(0, store.Nanos(tasks.StatusTime(last))), last.ID)
	}
	return page, nil
}

// CountByState implements tasks.Store.
func (s *Store) CountByState(ctx context.Context) (map[a2a.TaskState]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT state, count(*) FROM tasks WHERE finished_ns IS NULL OR finished_ns > $1 GROUP BY state`, s.cutoff())
	if err != nil {
		return nil, s.unavailable("count tasks", err)
	}
	defer rows.Close()
	out := make(map[a2a.TaskState]int)
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return nil, s.unavailable("count tasks", err)
		}
		out[a2a.TaskState(state)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("count tasks", err)
	}
	return out, nil
}

type queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) exists(ctx context.Context, q queryer, id a2a.TaskID) error {
	if !tasks.Storable(string(id)) {
		return notFound(id)
	}
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM tasks WHERE id = $1 AND (finished_ns IS NULL OR finished_ns > $2)`, string(id), s.cutoff()).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound(id)
	}
	if err != nil {
		return s.unavailable("read task", err)
	}
	return nil
}

// SetPush implements tasks.Store.
func (s *Store) SetPush(ctx context.Context, id a2a.TaskID, target tasks.PushTarget) (tasks.PushTarget, error) {
	if !tasks.Storable(string(id)) {
		return tasks.PushTarget{}, notFound(id)
	}
	if target.Config.ID == "" {
		target.Config.ID = uuid.NewString()
	}
	cfg, err := store.EncodePush(target.Config)
	if err != nil {
		return tasks.PushTarget{}, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return tasks.PushTarget{}, s.unavailable("set push config", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// The task's row is locked: its webhooks change one registration at a
	// time, across replicas too.
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM tasks WHERE id = $1 AND (finished_ns IS NULL OR finished_ns > $2) FOR UPDATE`, string(id), s.cutoff()).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return tasks.PushTarget{}, notFound(id)
	}
	if err != nil {
		return tasks.PushTarget{}, s.unavailable("set push config", err)
	}
	if err := tasks.CheckPushID(target.Config.ID); err != nil {
		return tasks.PushTarget{}, err
	}
	tag, err := tx.Exec(ctx, `UPDATE push_configs SET version = $1, config = $2 WHERE task_id = $3 AND config_id = $4`,
		target.Version, cfg, string(id), target.Config.ID)
	if err != nil {
		return tasks.PushTarget{}, s.unavailable("set push config", err)
	}
	if tag.RowsAffected() == 0 {
		var count, next int64
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(max(seq), 0) + 1 FROM push_configs WHERE task_id = $1`, string(id)).Scan(&count, &next); err != nil {
			return tasks.PushTarget{}, s.unavailable("set push config", err)
		}
		if count >= tasks.MaxPushConfigs {
			return tasks.PushTarget{}, fmt.Errorf("task %s already has %d push notification configs: %w", id, tasks.MaxPushConfigs, a2a.ErrInvalidParams)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO push_configs (task_id, config_id, seq, version, config) VALUES ($1, $2, $3, $4, $5)`,
			string(id), target.Config.ID, next, target.Version, cfg); err != nil {
			return tasks.PushTarget{}, s.unavailable("set push config", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return tasks.PushTarget{}, s.unavailable("set push config", err)
	}
	return target, nil
}

// GetPush implements tasks.Store.
func (s *Store) GetPush(ctx context.Context, id a2a.TaskID, configID string) (tasks.PushTarget, error) {
	if err := s.exists(ctx, s.pool, id); err != nil {
		return tasks.PushTarget{}, err
	}
	if !tasks.Storable(configID) {
		return tasks.PushTarget{}, fmt.Errorf("%w: task %s has no push notification config %q", a2a.ErrTaskNotFound, id, configID)
	}
	var version string
	var cfg []byte
	var err error
	if configID == "" {
		err = s.pool.QueryRow(ctx, `SELECT version, config FROM push_configs WHERE task_id = $1 ORDER BY seq DESC LIMIT 1`, string(id)).Scan(&version, &cfg)
	} else {
		err = s.pool.QueryRow(ctx, `SELECT version, config FROM push_configs WHERE task_id = $1 AND config_id = $2`, string(id), configID).Scan(&version, &cfg)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return tasks.PushTarget{}, fmt.Errorf("%w: task %s has no push notification config %q", a2a.ErrTaskNotFound, id, configID)
	}
	if err != nil {
		return tasks.PushTarget{}, s.unavailable("get push config", err)
	}
	return store.DecodePush(cfg, version)
}

// ListPush implements tasks.Store.
func (s *Store) ListPush(ctx context.Context, id a2a.TaskID) ([]tasks.PushTarget, error) {
	if !tasks.Storable(string(id)) {
		return nil, notFound(id)
	}
	rows, err := s.pool.Query(ctx, `SELECT version, config FROM push_configs WHERE task_id = $1 ORDER BY seq`, string(id))
	if err != nil {
		return nil, s.unavailable("list push configs", err)
	}
	defer rows.Close()
	var out []tasks.PushTarget
	for rows.Next() {
		var version string
		var cfg []byte
		if err := rows.Scan(&version, &cfg); err != nil {
			return nil, s.unavailable("list push configs", err)
		}
		p, err := store.DecodePush(cfg, version)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("list push configs", err)
	}
	if len(out) == 0 {
		if err := s.exists(ctx, s.pool, id); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// HasPush reports in one read whether a task has webhooks (the engine asks
// for a task it runs but did not create, and after announcements were lost:
// PushRegistered).
func (s *Store) HasPush(ctx context.Context, id a2a.TaskID) (bool, error) {
	if !tasks.Storable(string(id)) {
		return false, nil
	}
	var has bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM push_configs WHERE task_id = $1)`, string(id)).Scan(&has); err != nil {
		return false, s.unavailable("list push configs", err)
	}
	return has, nil
}

// DeletePush implements tasks.Store.
func (s *Store) DeletePush(ctx context.Context, id a2a.TaskID, configID string) error {
	if err := s.exists(ctx, s.pool, id); err != nil {
		return err
	}
	if !tasks.Storable(configID) {
		return nil // no such config: nothing to delete
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM push_configs WHERE task_id = $1 AND config_id = $2`, string(id), configID); err != nil {
		return s.unavailable("delete push config", err)
	}
	return nil
}

// Retain implements tasks.Durable.
func (s *Store) Retain(ctx context.Context, id a2a.TaskID, payload []byte) error {
	if !tasks.Storable(string(id)) {
		return notFound(id)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET payload = $1, size = GREATEST(octet_length(snapshot), coalesce(octet_length($1::bytea), 0)) WHERE id = $2`, payload, string(id))
	if err != nil {
		return s.unavailable("retain payload", err)
	}
	if tag.RowsAffected() == 0 {
		return notFound(id)
	}
	return nil
}

// Retained implements tasks.Durable.
func (s *Store) Retained(ctx context.Context, id a2a.TaskID) ([]byte, error) {
	if !tasks.Storable(string(id)) {
		return nil, notFound(id)
	}
	var p []byte
	err := s.pool.QueryRow(ctx, `SELECT payload FROM tasks WHERE id = $1`, string(id)).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, s.unavailable("read payload", err)
	}
	return p, nil
}

// KeepWaiting implements tasks.WaitingKeeper.
func (s *Store) KeepWaiting(ctx context.Context, id a2a.TaskID, rec []byte) error {
	if !tasks.Storable(string(id)) {
		return notFound(id)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET waiting = $1 WHERE id = $2`, rec, string(id))
	if err != nil {
		return s.unavailable("keep the waiting record", err)
	}
	if tag.RowsAffected() == 0 {
		return notFound(id)
	}
	return nil
}

// Waiting implements tasks.WaitingKeeper.
func (s *Store) Waiting(ctx context.Context, id a2a.TaskID) ([]byte, error) {
	if !tasks.Storable(string(id)) {
		return nil, notFound(id)
	}
	var p []byte
	err := s.pool.QueryRow(ctx, `SELECT waiting FROM tasks WHERE id = $1`, string(id)).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, s.unavailable("read the waiting record", err)
	}
	return p, nil
}

// deadRunner is the SQL condition "the runner column r names no live lease".
const deadRunner = `NOT EXISTS (SELECT 1 FROM leases l WHERE l.instance = %s AND l.heartbeat >= now() - make_interval(secs => %s))`

// Orphans implements tasks.Durable: the unfinished tasks whose runner's
// lease has expired (or is gone), oldest first; none while this replica may
// not judge leases (contact.go).
func (s *Store) Orphans(ctx context.Context) ([]tasks.Orphan, error) {
	if !s.contact.mayJudge() {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT t.runner, t.snapshot FROM tasks t WHERE t.finished_ns IS NULL AND t.runner <> $1 AND `+
		fmt.Sprintf(deadRunner, "t.runner", "$2")+` ORDER BY t.created_ns, t.seq`, s.instance, s.opts.LeaseTTL.Seconds())
	if err != nil {
		return nil, s.unavailable("list orphans", err)
	}
	defer rows.Close()
	var out []tasks.Orphan
	for rows.Next() {
		var runner string
		var snap []byte
		if err := rows.Scan(&runner, &snap); err != nil {
			return nil, s.unavailable("list orphans", err)
		}
		t, err := store.DecodeTask(snap)
		if err != nil {
			return nil, err
		}
		out = append(out, tasks.Orphan{Task: t, Runner: runner})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("list orphans", err)
	}
	if !s.contact.mayJudge() {
		return nil, nil // the contact broke while the list was read
	}
	return out, nil
}

// Claim implements tasks.Durable; it claims nothing while this replica may
// not judge leases (contact.go).
func (s *Store) Claim(ctx context.Context, id a2a.TaskID, from string) (bool, error) {
	if !s.contact.mayJudge() {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET runner = $1 WHERE id = $2 AND runner = $3 AND finished_ns IS NULL`, s.instance, string(id), from)
	if err != nil {
		return false, s.unavailable("claim task", err)
	}
	return tag.RowsAffected() == 1, nil
}

// AddPending implements tasks.PushJournal.
func (s *Store) AddPending(ctx context.Context, p tasks.PendingPush) (int64, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, `INSERT INTO push_pending (task_id, runner, snapshot, event, final) VALUES ($1, $2, $3, $4, $5) RETURNING seq`,
		string(p.TaskID), s.instance, p.Snapshot, p.Event, p.Final).Scan(&seq)
	if err != nil {
		return 0, s.unavailable("journal push notification", err)
	}
	return seq, nil
}

// DonePending implements tasks.PushJournal.
func (s *Store) DonePending(ctx context.Context, seq int64) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM push_pending WHERE seq = $1`, seq); err != nil {
		return s.unavailable("clear push notification", err)
	}
	return nil
}

// Pending implements tasks.PushJournal: the events whose deliverer's lease
// has expired, which this replica claims and delivers from now on; none
// while this replica may not judge leases (contact.go).
func (s *Store) Pending(ctx context.Context) ([]tasks.PendingPush, error) {
	if !s.contact.mayJudge() {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `UPDATE push_pending p SET runner = $1 WHERE p.runner <> $1 AND `+
		fmt.Sprintf(deadRunner, "p.runner", "$2")+` RETURNING seq, task_id, snapshot, event, final`, s.instance, s.opts.LeaseTTL.Seconds())
	if err != nil {
		return nil, s.unavailable("claim pending push notifications", err)
	}
	defer rows.Close()
	var out []tasks.PendingPush
	for rows.Next() {
		var p tasks.PendingPush
		var id string
		if err := rows.Scan(&p.Seq, &id, &p.Snapshot, &p.Event, &p.Final); err != nil {
			return nil, s.unavailable("claim pending push notifications", err)
		}
		p.TaskID = a2a.TaskID(id)
		out = append(out, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("claim pending push notifications", err)
	}
	sortPending(out)
	return out, nil
}

func sortPending(p []tasks.PendingPush) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && p[j].Seq < p[j-1].Seq; j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}
