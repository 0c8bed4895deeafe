package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/a2a/tasks/storetest"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

func watchTask(id string, state a2a.TaskState) *a2a.Task {
	ts := time.Now().UTC()
	return &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: state, Timestamp: &ts}}
}

// A task's write is announced to the replicas that watch it, and to no one
// when none does: a listener sees the watched task's notification, never
// the unwatched one's written before it; once the watch ends, the watched
// task's writes are not announced either.
func TestNotifyOnlyWatched(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	dsn := srv.Database(t)
	a, b := open(t, dsn, storetest.Config{Capacity: 1000}), open(t, dsn, storetest.Config{Capacity: 1000})
	for _, id := range []string{"quiet", "watched"} {
		if err := a.Create(ctx, watchTask(id, a2a.TaskStateSubmitted), "o"); err != nil {
			t.Fatal(err)
		}
	}
	l, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if _, err := l.Exec(ctx, `LISTEN agentd_task`); err != nil {
		t.Fatal(err)
	}
	next := func() string {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := l.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return n.Payload
	}
	wctx, stop := context.WithCancel(ctx)
	changed := b.Watch(wctx, "watched")
	if err := a.Put(ctx, watchTask("quiet", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, watchTask("watched", a2a.TaskStateWorking)); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "watched" {
		t.Fatalf("first notification for %q, want watched (the unwatched task's write announced)", got)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the watching replica was not woken")
	}
	stop()
	var rows int
	testkit.WaitFor(t, 10*time.Second, "the watch's row deleted", func() bool {
		return l.QueryRow(ctx, `SELECT count(*) FROM task_watchers`).Scan(&rows) == nil && rows == 0
	})
	if err := a.Put(ctx, watchTask("watched", a2a.TaskStateCompleted)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Exec(ctx, `SELECT pg_notify('agentd_task', 'marker')`); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "marker" {
		t.Fatalf("notification for %q after the watch ended, want none", got)
	}
}

// A watch that begins while a write of the task is in flight (the task's row
// held, not yet committed, so that its trigger saw no watcher) returns only
// once that write has committed: the read after Watch sees it.
func TestWatchWaitsForAWriteInFlight(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	dsn := srv.Database(t)
	a, b := open(t, dsn, storetest.Config{Capacity: 1000}), open(t, dsn, storetest.Config{Capacity: 1000})
	if err := a.Create(ctx, watchTask("t", a2a.TaskStateSubmitted), "o"); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE tasks SET state = 'working' WHERE id = 't'`); err != nil {
		t.Fatal(err)
	}
	poll, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer poll.Close(ctx)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	watched := make(chan (<-chan struct{}), 1)
	go func() { watched <- b.Watch(wctx, "t") }()
	testkit.WaitFor(t, 10*time.Second, "the watch waiting for the task's row", func() bool {
		var n int
		return poll.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR SHARE%'`).Scan(&n) == nil && n == 1
	})
	select {
	case <-watched:
		t.Fatal("Watch returned while a write of the task was in flight")
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watched:
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return once the write committed")
	}
	var state string
	if err := poll.QueryRow(ctx, `SELECT state FROM tasks WHERE id = 't'`).Scan(&state); err != nil || state != "working" {
		t.Fatalf("state %q, %v", state, err)
	}
}

// A database of schema version 5 with a running task in it, migrated to
// version 6: the fence refuses another replica's write and raises the epoch
// of a takeover as before, the runner's own write passes, and the task's
// writes announce themselves only while it is watched.
func TestMigrateWatchers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, c := databaseAt(t, 5)
	if _, err := c.Exec(ctx, `INSERT INTO leases (instance, heartbeat, started) VALUES ('old', 'infinity', now());
		INSERT INTO tasks (id, owner, context_id, state, updated_ns, created_ns, runner, snapshot)
			VALUES ('t', 'alice', 'c', 'working', 1, 1, 'old', '\x00')`); err != nil {
		t.Fatal(err)
	}
	s := open(t, dsn, storetest.Config{})
	var v int
	if err := c.QueryRow(ctx, `SELECT version FROM agentd_schema`).Scan(&v); err != nil || v != SchemaVersion || v < 6 {
		t.Fatalf("schema version %d (%v), want %d", v, err, SchemaVersion)
	}
	if _, err := c.Exec(ctx, `LISTEN agentd_task`); err != nil {
		t.Fatal(err)
	}
	as := func(instance, sql string) error {
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SELECT set_config('agentd.instance', $1, true)`, instance); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := as("other", `UPDATE tasks SET snapshot = '\x01' WHERE id = 't'`); fenced(err) == nil {
		t.Fatalf("another replica's write of a live runner's task: %v, want the fence's refusal", err)
	}
	if err := as("old", `UPDATE tasks SET snapshot = '\x02' WHERE id = 't'`); err != nil {
		t.Fatalf("the runner's own write: %v", err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	s.Watch(wctx, "t")
	if err := as("other", `UPDATE tasks SET runner = 'other' WHERE id = 't'`); err != nil {
		t.Fatalf("a takeover: %v", err)
	}
	var epoch int
	var from string
	if err := c.QueryRow(ctx, `SELECT epoch, taken_from FROM tasks WHERE id = 't'`).Scan(&epoch, &from); err != nil || epoch != 1 || from != "old" {
		t.Fatalf("after the takeover epoch %d, taken from %q (%v), want 1, old", epoch, from, err)
	}
	if err := as("other", `UPDATE tasks SET snapshot = '\x03' WHERE id = 't'`); err != nil {
		t.Fatalf("the new runner's write: %v", err)
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := c.WaitForNotification(nctx)
	if err != nil || n.Payload != "t" {
		t.Fatalf("notification %v, %v: want the watched task's (and none for the unwatched writes before)", n, err)
	}
}

// A replica that reads another's running task, committed without waiting
// for the WAL flush (a creation), flushes the WAL before it returns it: what
// it shows (a duplicate send's answer, ListTasks, a stream) survives a crash
// of PostgreSQL. The WAL writer is slowed (10 s) so that a creation stays
// unflushed for the test's moment, on a server with synchronous commits on
// (the tests' others have them off).
func TestOthersCreationFlushedBeforeRead(t *testing.T) {
	t.Parallel()
	srv, err := pgtest.New(pgtest.Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ctx := context.Background()
	dsn := srv.Database(t)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `ALTER SYSTEM SET wal_writer_delay = '10s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	a, b := open(t, dsn, storetest.Config{Capacity: 1000}), open(t, dsn, storetest.Config{Capacity: 1000})
	// created writes a task through a and returns the WAL's insert position
	// after it, once that position is seen unflushed (a heartbeat, a
	// synchronous commit, may flush it first: then another task).
	created := func(prefix string) (a2a.TaskID, string) {
		t.Helper()
		for i := range 20 {
			id := a2a.TaskID(fmt.Sprintf("%s-%d", prefix, i))
			if err := a.Create(ctx, watchTask(string(id), a2a.TaskStateSubmitted), "o"); err != nil {
				t.Fatal(err)
			}
			var lsn string
			var unflushed bool
			if err := c.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text, pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn()`).Scan(&lsn, &unflushed); err != nil {
				t.Fatal(err)
			}
			if unflushed {
				return id, lsn
			}
		}
		t.Fatal("every creation was flushed at once: the WAL writer's delay did not hold")
		return "", ""
	}
	flushedTo := func(lsn string) bool {
		t.Helper()
		var ok bool
		if err := c.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, lsn).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}

	id, lsn := created("get")
	got, _, err := b.Get(ctx, id)
	if err != nil || got.ID != id {
		t.Fatalf("get through b: %v, %v", got, err)
	}
	if !flushedTo(lsn) {
		t.Fatal("b returned a's unflushed creation without flushing the WAL")
	}
	id, lsn = created("list")
	page, err := b.List(ctx, tasks.ListQuery{Owner: "o", PageSize: 100})
	if err != nil || len(page.Tasks) == 0 || page.Tasks[0].ID != id {
		t.Fatalf("list through b: %+v, %v", page, err)
	}
	if !flushedTo(lsn) {
		t.Fatal("b listed a's unflushed creation without flushing the WAL")
	}
}
