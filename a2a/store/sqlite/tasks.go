package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/uuid"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/a2a/tasks"
)

func notFound(id a2a.TaskID) error { return fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, id) }

// nullable is a message id as the tasks table holds it: NULL for none.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// finishedAt is the finish time to store for a snapshot: now once terminal.
func (s *Store) finishedAt(t *a2a.Task) any {
	if t.Status.State.Terminal() {
		return s.now()
	}
	return nil
}

// Create implements tasks.Store. In one transaction it makes room for the
// task (makeRoom: ErrStoreFull, ErrCallerQuota) and inserts it; an existing
// id or a duplicate message makes the unique keys refuse the insert, and only
// then is the cause looked up. Tasks past their retention are deleted at most
// once a second (reads never see them anyway).
func (s *Store) Create(ctx context.Context, t *a2a.Task, owner string) error {
	if err := tasks.CheckNewTask(t, owner); err != nil {
		return err // as every store answers it (PostgreSQL's text cannot hold it)
	}
	snap, err := store.EncodeTask(t)
	if err != nil {
		return err
	}
	key := tasks.MessageKey(t)
	return s.stageWrite(ctx, "create task", string(t.ID), func(tx *wtx) error { return s.create(tx, t, owner, key, snap, false) })
}

// create is Create's write; retried, it is the second insert, after the
// message's expired task was deleted.
func (s *Store) create(tx *wtx, t *a2a.Task, owner, key string, snap []byte, retried bool) error {
	ctx := ctxBG
	if err := s.expire(ctx, tx); err != nil {
		return err
	}
	size := int64(len(snap))
	if size > s.opts.QuotaBytes {
		return fmt.Errorf("%w: the task alone is %d bytes, the quota %d", tasks.ErrCallerQuota, size, s.opts.QuotaBytes)
	}
	args := []any{string(t.ID), owner, nullable(key), t.ContextID, string(t.Status.State), store.Nanos(tasks.StatusTime(t)), s.now(), s.finishedAt(t), s.instance, snap, len(snap)}
	// The common case, room without evicting, in one statement: the insert
	// takes place only if the totals (and the caller's, under a quota)
	// leave room for it. Otherwise makeRoom evicts and the plain insert
	// follows.
	o := s.opts
	var res sql.Result
	var err error
	if o.QuotaTasks == o.Capacity && o.QuotaBytes == o.Bytes {
		res, err = tx.ExecContext(ctx, insertRoomSQL, append(args, o.Capacity, o.Bytes-size)...)
	} else {
		res, err = tx.ExecContext(ctx, insertQuotaSQL, append(args, o.Capacity, o.Bytes-size, o.QuotaTasks, o.QuotaBytes-size, owner)...)
	}
	if err == nil {
		if n, _ := res.RowsAffected(); n == 0 {
			if err := s.makeRoom(ctx, tx, owner, string(t.ID), size); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, insertSQL, args...)
		}
	}
	if isConstraint(err) && key != "" && !retried {
		// The message's task past its retention, which the sweep (once a
		// second) has not deleted yet, is no duplicate: reads no longer
		// see it, so it goes now and the message makes a new task.
		res, derr := tx.ExecContext(ctx, `DELETE FROM tasks WHERE owner = ? AND message_id = ? AND finished_ns IS NOT NULL AND finished_ns <= ?`, owner, key, s.cutoff())
		if derr != nil {
			return s.unavailable("create task", derr)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return s.create(tx, t, owner, key, snap, true)
		}
	}
	if isConstraint(err) {
		if key != "" {
			var existing string
			switch err := tx.QueryRowContext(ctx, `SELECT id FROM tasks WHERE owner = ? AND message_id = ?`, owner, key).Scan(&existing); {
			case err == nil:
				return &tasks.DuplicateError{Existing: a2a.TaskID(existing), MessageID: key}
			case !errors.Is(err, sql.ErrNoRows):
				return s.unavailable("create task", err)
			}
		}
		return fmt.Errorf("sqlite: task %s already exists", t.ID)
	}
	if err != nil {
		return s.unavailable("create task", err)
	}
	return nil
}

// expire deletes the tasks past their retention, at most once a second of
// the store's clock.
func (s *Store) expire(ctx context.Context, tx execer) error {
	if s.opts.Retention <= 0 {
		return nil
	}
	now := s.now()
	if last := s.expired.Load(); now-last < int64(time.Second) && now >= last {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE rowid IN (`+finishedByCutSQL+`)`, s.cutoff()); err != nil {
		return s.unavailable("expire tasks", err)
	}
	s.expired.Store(now)
	return nil
}

// Put implements tasks.Store. A snapshot that takes the store over its byte
// bound makes finished tasks go (makeRoom); it is never refused for it.
func (s *Store) Put(ctx context.Context, t *a2a.Task) error {
	_, err := s.put(ctx, t, false)
	return err
}

// PutEnd implements tasks.EndJournal: Put of a terminal snapshot and, in
// its transaction, the journal's entry for the end's notification when the
// task has webhooks (endPendingSQL).
func (s *Store) PutEnd(ctx context.Context, t *a2a.Task) (int64, error) {
	return s.put(ctx, t, true)
}

// endPendingSQL journals a task's end, the snapshot just written, if the
// task has webhooks and is not expired (its arguments: the runner, the id,
// the expiry's cutoff); an empty event is built from the snapshot by the
// pusher (tasks.EndJournal).
const endPendingSQL = `INSERT INTO push_pending (task_id, runner, snapshot, event, final)
	SELECT id, ?, snapshot, x'', 1 FROM tasks t
	WHERE t.id = ? AND (t.finished_ns IS NULL OR t.finished_ns > ?) AND EXISTS (SELECT 1 FROM push_configs p WHERE p.task_id = t.id)`

// PutKeeping implements tasks.MessageKeeper: the stored snapshot is read in
// the write's transaction, and its first message's bytes copied into t's
// encoding (store.Kept).
func (s *Store) PutKeeping(ctx context.Context, t *a2a.Task) error {
	k, err := store.EncodeKept(t)
	if err != nil {
		return err
	}
	_, err = s.putSnap(ctx, t, false, nil, &k)
	return err
}

// KeptMessage implements tasks.MessageKeeper (store.KeptMessage).
func (s *Store) KeptMessage(ctx context.Context, id a2a.TaskID, hollow *a2a.Message) (*a2a.Message, error) {
	if err := s.Sync(ctx); err != nil {
		return nil, err
	}
	var snap []byte
	err := s.get.QueryRowContext(ctx, string(id), s.cutoff()).Scan(new(string), &snap)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, s.unavailable("get task", err)
	}
	return store.KeptMessage(snap, hollow)
}

func (s *Store) put(ctx context.Context, t *a2a.Task, end bool) (int64, error) {
	snap, err := store.EncodeTask(t)
	if err != nil {
		return 0, err
	}
	return s.putSnap(ctx, t, end, snap, nil)
}

// putSnap writes t's snapshot: snap, or with kept set, kept's with the
// stored first message in it, read in the write's transaction.
func (s *Store) putSnap(ctx context.Context, t *a2a.Task, end bool, snap []byte, kept *store.Kept) (int64, error) {
	var seq int64
	err := s.write(ctx, "put task", func(tx *wtx) error {
		seq = 0
		snap := snap
		if kept != nil {
			var stored []byte
			err := tx.QueryRowContext(ctxBG, `SELECT snapshot FROM tasks WHERE id = ? AND (finished_ns IS NULL OR finished_ns > ?)`, string(t.ID), s.cutoff()).Scan(&stored)
			if errors.Is(err, sql.ErrNoRows) {
				return notFound(t.ID)
			}
			if err != nil {
				return s.unavailable("put task", err)
			}
			if snap, err = kept.KeptIn(stored); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctxBG, putSQL, string(t.Status.State), store.Nanos(tasks.StatusTime(t)), t.ContextID, snap, len(snap), s.finishedAt(t), s.now(), string(t.ID), s.cutoff())
		if err != nil {
			return s.unavailable("put task", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound(t.ID)
		}
		if s.opts.Bytes < math.MaxInt64 {
			if err := s.makeRoom(ctxBG, tx, "", string(t.ID), -1); err != nil {
				return err
			}
		}
		if end {
			res, err := tx.ExecContext(ctxBG, endPendingSQL, s.instance, string(t.ID), s.cutoff())
			if err != nil {
				return s.unavailable("journal push notification", err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				if seq, err = res.LastInsertId(); err != nil {
					return s.unavailable("journal push notification", err)
				}
			}
		}
		return nil
	})
	return seq, err
}

// The statements of every task's writes. insertRoomSQL inserts only if the
// store's totals leave room for one task more (its two last arguments: the
// capacity, the byte bound less the task's size); insertQuotaSQL only if
// the caller's totals also do (then the task quota, the byte quota less the
// size, the owner).
const (
	insertSQL = `INSERT INTO tasks (id, owner, message_id, context_id, state, updated_ns, created_ns, finished_ns, runner, snapshot, size)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertRoomSQL = `INSERT INTO tasks (id, owner, message_id, context_id, state, updated_ns, created_ns, finished_ns, runner, snapshot, size)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
		WHERE (SELECT coalesce(sum(n), 0) < ? AND coalesce(sum(bytes), 0) <= ? FROM callers)`
	insertQuotaSQL = `INSERT INTO tasks (id, owner, message_id, context_id, state, updated_ns, created_ns, finished_ns, runner, snapshot, size)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
		WHERE (SELECT coalesce(sum(n), 0) < ? AND coalesce(sum(bytes), 0) <= ? FROM callers)
		AND (SELECT coalesce(sum(n), 0) < ? AND coalesce(sum(bytes), 0) <= ? FROM callers WHERE owner = ?)`
	// putSQL's arguments: state, updated, context, snapshot, its size, the
	// finish time (NULL while running), now, id, the expiry's cutoff. A
	// task that ends drops its retained payload (only an unfinished task
	// runs again); a running one counts its payload, which repeats its
	// message, once beside its snapshot: the larger of the two.
	putSQL = `UPDATE tasks SET state = ?1, updated_ns = ?2, context_id = ?3, snapshot = ?4,
		payload = CASE WHEN ?6 IS NULL THEN payload END,
		size = CASE WHEN ?6 IS NULL THEN max(?5, coalesce(length(payload), 0)) ELSE ?5 END,
		finished_ns = CASE WHEN ?6 IS NULL THEN NULL ELSE coalesce(finished_ns, ?7) END
		WHERE id = ?8 AND (finished_ns IS NULL OR finished_ns > ?9)`
)

// The finished tasks are found per caller (schema 5: the one index of
// finished tasks is tasks_owner_finished): finishedByCutSQL selects the
// rowids of the tasks finished at or before its argument; oldestOthersSQL
// the rowid of the oldest finished task of each caller but its argument,
// for an ORDER BY t.finished_ns, t.rowid to follow.
const (
	finishedByCutSQL = `SELECT t.rowid FROM callers c CROSS JOIN tasks t
		WHERE t.owner = c.owner AND t.finished_ns IS NOT NULL AND t.finished_ns <= ?`
	oldestOthersSQL = `SELECT t.rowid FROM callers c CROSS JOIN tasks t
		WHERE c.owner != ? AND t.rowid = (SELECT rowid FROM tasks
			WHERE owner = c.owner AND finished_ns IS NOT NULL ORDER BY finished_ns, rowid LIMIT 1)`
)

// execer is a transaction: the writer's (wtx), or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// makeRoom evicts finished tasks in tx as the store's policy says (Options):
// for a new task id of owner taking size bytes, first within owner's quota
// (its own oldest finished tasks), then within the store's bounds (its own,
// then the oldest finished tasks of callers over their fair share, or
// anyone's when there is no quota); it fails with tasks.ErrCallerQuota or
// tasks.ErrStoreFull and evicts nothing that the rollback does not restore.
// With size < 0 it is the growth of the stored task id: only the byte bound
// is made good, as far as finished tasks allow, and it never fails but on
// the database.
func (s *Store) makeRoom(ctx context.Context, tx execer, owner, id string, size int64) error {
	o := s.opts
	noQuota := o.QuotaTasks == o.Capacity && o.QuotaBytes == o.Bytes
	growth := size < 0
	if growth {
		if err := tx.QueryRowContext(ctx, `SELECT owner FROM tasks WHERE id = ?`, id).Scan(&owner); err != nil {
			return s.unavailable("make room", err)
		}
		size = 0
	}
	evict := func(query string, args ...any) (bool, error) {
		res, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE rowid = (`+query+`)`, args...)
		if err != nil {
			return false, s.unavailable("make room", err)
		}
		k, _ := res.RowsAffected()
		return k > 0, nil
	}
	own := func() (bool, error) {
		return evict(`SELECT rowid FROM tasks WHERE owner = ? AND id != ? AND finished_ns IS NOT NULL ORDER BY finished_ns, rowid LIMIT 1`, owner, id)
	}
	// The oldest finished task of the other callers over their fair share:
	// the first of each caller's, the oldest of those. The shares divide the
	// store's bounds among the callers holding tasks and owner (package
	// internal/budget), counted once, before anything goes.
	shareTasks, shareBytes := -1, int64(-1)
	others := func() (bool, error) {
		if noQuota {
			return evict(oldestOthersSQL+` ORDER BY t.finished_ns, t.rowid LIMIT 1`, owner)
		}
		if shareTasks < 0 {
			var n int64
			if err := tx.QueryRowContext(ctx, `SELECT count(*) + NOT EXISTS (SELECT 1 FROM callers WHERE owner = ?) FROM callers`, owner).Scan(&n); err != nil {
				return false, s.unavailable("make room", err)
			}
			n = max(n, 1)
			shareTasks, shareBytes = min(o.QuotaTasks, o.Capacity/int(n)), min(o.QuotaBytes, o.Bytes/n)
		}
		return evict(oldestOthersSQL+` AND (c.n > ? OR c.bytes > ?) ORDER BY t.finished_ns, t.rowid LIMIT 1`, owner, shareTasks, shareBytes)
	}
	if !growth {
		if size > o.QuotaBytes {
			return fmt.Errorf("%w: the task alone is %d bytes, the quota %d", tasks.ErrCallerQuota, size, o.QuotaBytes)
		}
		for !noQuota {
			var n int
			var b int64
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0), coalesce(sum(bytes), 0) FROM callers WHERE owner = ?`, owner).Scan(&n, &b); err != nil {
				return s.unavailable("make room", err)
			}
			if n+1 <= o.QuotaTasks && b+size <= o.QuotaBytes {
				break
			}
			ok, err := own()
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: %d tasks, %d bytes held (quota %d, %d bytes)", tasks.ErrCallerQuota, n, b, o.QuotaTasks, o.QuotaBytes)
			}
		}
	}
	add := 1
	if growth {
		add = 0
	}
	for {
		var n int
		var b int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0), coalesce(sum(bytes), 0) FROM callers`).Scan(&n, &b); err != nil {
			return s.unavailable("make room", err)
		}
		if n+add <= o.Capacity && b+size <= o.Bytes {
			return nil
		}
		ok, err := own()
		if err == nil && !ok {
			ok, err = others()
		}
		if err != nil {
			return err
		}
		if !ok {
			if growth {
				return nil // over the bound until tasks finish or go
			}
			return tasks.ErrStoreFull
		}
	}
}

// Get implements tasks.Store.
func (s *Store) Get(ctx context.Context, id a2a.TaskID) (*a2a.Task, string, error) {
	if err := s.Sync(ctx); err != nil {
		return nil, "", err
	}
	var owner string
	var snap []byte
	err := s.get.QueryRowContext(ctx, string(id), s.cutoff()).Scan(&owner, &snap)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", notFound(id)
	}
	if err != nil {
		return nil, "", s.unavailable("get task", err)
	}
	t, err := store.DecodeTask(snap)
	if err != nil {
		return nil, "", err
	}
	return t, owner, nil
}

// List implements tasks.Store.
func (s *Store) List(ctx context.Context, q tasks.ListQuery) (tasks.ListPage, error) {
	if err := s.Sync(ctx); err != nil {
		return tasks.ListPage{}, err
	}
	where := []string{"(finished_ns IS NULL OR finished_ns > ?)"}
	args := []any{s.cutoff()}
	if !q.AnyOwner {
		where, args = append(where, "owner = ?"), append(args, q.Owner)
	}
	if q.ContextID != "" {
		where, args = append(where, "context_id = ?"), append(args, q.ContextID)
	}
	if q.State != "" {
		where, args = append(where, "state = ?"), append(args, string(q.State))
	}
	if !q.UpdatedAfter.IsZero() {
		where, args = append(where, "updated_ns >= ?"), append(args, store.Nanos(q.UpdatedAfter))
	}
	if q.Caller != nil {
		where, args = append(where, "owner = ?"), append(args, *q.Caller)
	}
	if !q.UpdatedBefore.IsZero() {
		where, args = append(where, "updated_ns < ?"), append(args, store.Nanos(q.UpdatedBefore))
	}
	if q.Text != "" {
		// instr, not LIKE: the text is data, no character of it a wildcard.
		where, args = append(where, "instr(lower(CAST(snapshot AS TEXT)), lower(?)) > 0"), append(args, q.Text)
	}
	cond := strings.Join(where, " AND ")
	pageCond, pageArgs := cond, args
	if q.PageToken != "" {
		at, id, err := tasks.ParsePageToken(q.PageToken)
		if err != nil {
			return tasks.ListPage{}, err
		}
		ns := store.Nanos(at)
		pageCond += " AND (updated_ns < ? OR (updated_ns = ? AND id < ?))"
		pageArgs = append(append([]any(nil), args...), ns, ns, string(id))
	}
	// The statements are prepared before the transaction holds a reader
	// connection (preparing waits for one).
	count, err := s.rs.stmt(ctx, "SELECT COUNT(*) FROM tasks WHERE "+cond)
	if err != nil {
		return tasks.ListPage{}, s.unavailable("list tasks", err)
	}
	list, err := s.rs.stmt(ctx, "SELECT snapshot FROM tasks WHERE "+pageCond+" ORDER BY updated_ns DESC, id DESC LIMIT ?")
	if err != nil {
		return tasks.ListPage{}, s.unavailable("list tasks", err)
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return tasks.ListPage{}, s.unavailable("list tasks", err)
	}
	defer tx.Rollback()
	page := tasks.ListPage{PageSize: q.PageSize}
	if err := tx.StmtContext(ctx, count).QueryRowContext(ctx, args...).Scan(&page.TotalSize); err != nil {
		return tasks.ListPage{}, s.unavailable("list tasks", err)
	}
	rows, err := tx.StmtContext(ctx, list).QueryContext(ctx, append(pageArgs, q.PageSize+1)...)
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
	if err := rows.Err(); err != nil {
		return tasks.ListPage{}, s.unavailable("list tasks", err)
	}
	if more {
		last := page.Tasks[len(page.Tasks)-1]
		page.NextPageToken = tasks.PageToken(time.Unix(0, store.Nanos(tasks.StatusTime(last))), last.ID)
	}
	return page, nil
}

// CountByState implements tasks.Store.
func (s *Store) CountByState(ctx context.Context) (map[a2a.TaskState]int, error) {
	if err := s.Sync(ctx); err != nil {
		return nil, err
	}
	rows, err := s.rs.QueryContext(ctx, `SELECT state, COUNT(*) FROM tasks WHERE finished_ns IS NULL OR finished_ns > ? GROUP BY state`, s.cutoff())
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

// queryer is a connection pool or a transaction.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// exists checks that a task is held.
func (s *Store) exists(ctx context.Context, q queryer, id a2a.TaskID) error {
	var one int
	err := q.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE id = ? AND (finished_ns IS NULL OR finished_ns > ?)`, string(id), s.cutoff()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound(id)
	}
	if err != nil {
		return s.unavailable("read task", err)
	}
	return nil
}

// SetPush implements tasks.Store.
func (s *Store) SetPush(ctx context.Context, id a2a.TaskID, target tasks.PushTarget) (tasks.PushTarget, error) {
	if target.Config.ID == "" {
		target.Config.ID = uuid.NewString()
	}
	cfg, err := store.EncodePush(target.Config)
	if err != nil {
		return tasks.PushTarget{}, err
	}
	err = s.write(ctx, "set push config", func(tx *wtx) error {
		ctx := ctxBG
		if err := s.exists(ctx, tx, id); err != nil {
			return err
		}
		if err := tasks.CheckPushID(target.Config.ID); err != nil {
			return err // as every store answers it
		}
		res, err := tx.ExecContext(ctx, `UPDATE push_configs SET version = ?, config = ? WHERE task_id = ? AND config_id = ?`,
			target.Version, cfg, string(id), target.Config.ID)
		if err != nil {
			return s.unavailable("set push config", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var count, next int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), coalesce(MAX(seq), 0) + 1 FROM push_configs WHERE task_id = ?`, string(id)).Scan(&count, &next); err != nil {
				return s.unavailable("set push config", err)
			}
			if count >= tasks.MaxPushConfigs {
				return fmt.Errorf("task %s already has %d push notification configs: %w", id, tasks.MaxPushConfigs, a2a.ErrInvalidParams)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO push_configs (task_id, config_id, seq, version, config) VALUES (?, ?, ?, ?, ?)`,
				string(id), target.Config.ID, next, target.Version, cfg); err != nil {
				return s.unavailable("set push config", err)
			}
		}
		return nil
	})
	if err != nil {
		return tasks.PushTarget{}, err
	}
	return target, nil
}

// GetPush implements tasks.Store.
func (s *Store) GetPush(ctx context.Context, id a2a.TaskID, configID string) (tasks.PushTarget, error) {
	if err := s.Sync(ctx); err != nil {
		return tasks.PushTarget{}, err
	}
	if err := s.exists(ctx, &s.rs, id); err != nil {
		return tasks.PushTarget{}, err
	}
	var version string
	var cfg []byte
	var err error
	if configID == "" {
		err = s.rs.QueryRowContext(ctx, `SELECT version, config FROM push_configs WHERE task_id = ? ORDER BY seq DESC LIMIT 1`, string(id)).Scan(&version, &cfg)
	} else {
		err = s.rs.QueryRowContext(ctx, `SELECT version, config FROM push_configs WHERE task_id = ? AND config_id = ?`, string(id), configID).Scan(&version, &cfg)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return tasks.PushTarget{}, fmt.Errorf("%w: task %s has no push notification config %q", a2a.ErrTaskNotFound, id, configID)
	}
	if err != nil {
		return tasks.PushTarget{}, s.unavailable("get push config", err)
	}
	return store.DecodePush(cfg, version)
}

// ListPush implements tasks.Store.
func (s *Store) ListPush(ctx context.Context, id a2a.TaskID) ([]tasks.PushTarget, error) {
	if err := s.Sync(ctx); err != nil {
		return nil, err
	}
	rows, err := s.rs.QueryContext(ctx, `SELECT version, config FROM push_configs WHERE task_id = ? ORDER BY seq`, string(id))
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
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("list push configs", err)
	}
	if len(out) == 0 {
		// None registered, or no such task.
		if err := s.exists(ctx, &s.rs, id); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DeletePush implements tasks.Store.
func (s *Store) DeletePush(ctx context.Context, id a2a.TaskID, configID string) error {
	return s.write(ctx, "delete push config", func(tx *wtx) error {
		if err := s.exists(ctxBG, tx, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctxBG, `DELETE FROM push_configs WHERE task_id = ? AND config_id = ?`, string(id), configID); err != nil {
			return s.unavailable("delete push config", err)
		}
		return nil
	})
}

// Retain implements tasks.Durable.
func (s *Store) Retain(ctx context.Context, id a2a.TaskID, payload []byte) error {
	return s.write(ctx, "retain payload", func(tx *wtx) error {
		res, err := tx.ExecContext(ctxBG, `UPDATE tasks SET payload = ?1, size = max(length(snapshot), coalesce(length(?1), 0)) WHERE id = ?2`, payload, string(id))
		if err != nil {
			return s.unavailable("retain payload", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound(id)
		}
		return nil
	})
}

// Retained implements tasks.Durable.
func (s *Store) Retained(ctx context.Context, id a2a.TaskID) ([]byte, error) {
	if err := s.Sync(ctx); err != nil {
		return nil, err
	}
	var p []byte
	err := s.rs.QueryRowContext(ctx, `SELECT payload FROM tasks WHERE id = ?`, string(id)).Scan(&p)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, s.unavailable("read payload", err)
	}
	return p, nil
}

// KeepWaiting implements tasks.WaitingKeeper.
func (s *Store) KeepWaiting(ctx context.Context, id a2a.TaskID, rec []byte) error {
	return s.write(ctx, "keep the waiting record", func(tx *wtx) error {
		res, err := tx.ExecContext(ctxBG, `UPDATE tasks SET waiting = ?1 WHERE id = ?2`, rec, string(id))
		if err != nil {
			return s.unavailable("keep the waiting record", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound(id)
		}
		return nil
	})
}

// Waiting implements tasks.WaitingKeeper.
func (s *Store) Waiting(ctx context.Context, id a2a.TaskID) ([]byte, error) {
	if err := s.Sync(ctx); err != nil {
		return nil, err
	}
	var p []byte
	err := s.rs.QueryRowContext(ctx, `SELECT waiting FROM tasks WHERE id = ?`, string(id)).Scan(&p)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, s.unavailable("read the waiting record", err)
	}
	return p, nil
}

// Orphans implements tasks.Durable: the unfinished tasks whose runner no
// longer holds its instance lock, oldest first.
func (s *Store) Orphans(ctx context.Context) ([]tasks.Orphan, error) {
	if err := s.Sync(ctx); err != nil {
		return nil, err
	}
	rows, err := s.rs.QueryContext(ctx, `SELECT runner, snapshot FROM tasks WHERE finished_ns IS NULL AND runner != ? ORDER BY created_ns, rowid`, s.instance)
	if err != nil {
		return nil, s.unavailable("list orphans", err)
	}
	defer rows.Close()
	live := map[string]bool{}
	var out []tasks.Orphan
	for rows.Next() {
		var runner string
		var snap []byte
		if err := rows.Scan(&runner, &snap); err != nil {
			return nil, s.unavailable("list orphans", err)
		}
		up, seen := live[runner]
		if !seen {
			if up, err = alive(s.dir, runner); err != nil {
				return nil, err
			}
			live[runner] = up
		}
		if up {
			continue
		}
		t, err := store.DecodeTask(snap)
		if err != nil {
			return nil, err
		}
		out = append(out, tasks.Orphan{Task: t, Runner: runner})
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("list orphans", err)
	}
	return out, nil
}

// Claim implements tasks.Durable.
func (s *Store) Claim(ctx context.Context, id a2a.TaskID, from string) (bool, error) {
	var n int64
	err := s.write(ctx, "claim task", func(tx *wtx) error {
		res, err := tx.ExecContext(ctxBG, `UPDATE tasks SET runner = ? WHERE id = ? AND runner = ? AND finished_ns IS NULL`, s.instance, string(id), from)
		if err != nil {
			return s.unavailable("claim task", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n == 1, err
}

// AddPending implements tasks.PushJournal.
func (s *Store) AddPending(ctx context.Context, p tasks.PendingPush) (int64, error) {
	var seq int64
	err := s.write(ctx, "journal push notification", func(tx *wtx) error {
		res, err := tx.ExecContext(ctxBG, `INSERT INTO push_pending (task_id, runner, snapshot, event, final) VALUES (?, ?, ?, ?, ?)`,
			string(p.TaskID), s.instance, p.Snapshot, p.Event, p.Final)
		if err != nil {
			return s.unavailable("journal push notification", err)
		}
		seq, err = res.LastInsertId()
		return err
	})
	return seq, err
}

// DonePending implements tasks.PushJournal.
func (s *Store) DonePending(ctx context.Context, seq int64) error {
	return s.write(ctx, "clear push notification", func(tx *wtx) error {
		if _, err := tx.ExecContext(ctxBG, `DELETE FROM push_pending WHERE seq = ?`, seq); err != nil {
			return s.unavailable("clear push notification", err)
		}
		return nil
	})
}

// Pending implements tasks.PushJournal: the events whose deliverer is gone,
// which this instance delivers from now on.
func (s *Store) Pending(ctx context.Context) ([]tasks.PendingPush, error) {
	runners, err := s.deadRunners(ctx, `SELECT DISTINCT runner FROM push_pending WHERE runner != ?`)
	if err != nil || len(runners) == 0 {
		return nil, err
	}
	var out []tasks.PendingPush
	for _, runner := range runners {
		err := s.write(ctx, "claim pending push notifications", func(tx *wtx) error {
			if _, err := tx.ExecContext(ctxBG, `UPDATE push_pending SET runner = ? WHERE runner = ?`, s.instance, runner); err != nil {
				return s.unavailable("claim pending push notifications", err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	rows, err := s.rs.QueryContext(ctx, `SELECT seq, task_id, snapshot, event, final FROM push_pending WHERE runner = ? ORDER BY seq`, s.instance)
	if err != nil {
		return nil, s.unavailable("read pending push notifications", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p tasks.PendingPush
		var id string
		if err := rows.Scan(&p.Seq, &id, &p.Snapshot, &p.Event, &p.Final); err != nil {
			return nil, s.unavailable("read pending push notifications", err)
		}
		p.TaskID = a2a.TaskID(id)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("read pending push notifications", err)
	}
	return out, nil
}

// deadRunners runs query (one runner column, this instance as its argument)
// and keeps the runners that are gone.
func (s *Store) deadRunners(ctx context.Context, query string) ([]string, error) {
	rows, err := s.rs.QueryContext(ctx, query, s.instance)
	if err != nil {
		return nil, s.unavailable("list runners", err)
	}
	var all []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			rows.Close()
			return nil, s.unavailable("list runners", err)
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("list runners", err)
	}
	var dead []string
	for _, r := range all {
		up, err := alive(s.dir, r)
		if err != nil {
			return nil, err
		}
		if !up {
			dead = append(dead, r)
		}
	}
	return dead, nil
}
