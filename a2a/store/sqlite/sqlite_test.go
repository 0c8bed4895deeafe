package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/a2a/tasks/storetest"
)

func open(t *testing.T, dir string, cfg storetest.Config) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, Options{Capacity: cfg.Capacity, Retention: cfg.Retention, QuotaTasks: cfg.QuotaTasks, Bytes: cfg.Bytes, Now: cfg.Clock, AuditKeep: cfg.AuditKeep, AuditMaxAge: cfg.AuditMaxAge})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The embedded store passes the conformance suite, reopened as a new
// instance for the durable tests.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T, cfg storetest.Config) tasks.Store { return open(t, t.TempDir(), cfg) },
		Reopen: func(t *testing.T, s tasks.Store, cfg storetest.Config) tasks.Store {
			old := s.(*Store)
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, old.dir, cfg)
		},
	})
}

// A database a newer agentd wrote is refused, naming both versions, and left
// as it is.
func TestSchemaNewer(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, storetest.Config{})
	if err := s.writeAlone(context.Background(), "test", func(w *wtx) error {
		_, err := w.ExecContext(context.Background(), "PRAGMA user_version = 99")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(context.Background(), dir, Options{})
	var se *store.SchemaError
	if !errors.As(err, &se) || !errors.Is(err, store.ErrSchemaNewer) || se.Found != 99 || se.Max != SchemaVersion {
		t.Fatalf("open: %v", err)
	}
	t.Log(err)
}

// A state directory that cannot be written is refused at Open.
func TestReadOnlyDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into a read-only directory")
	}
	dir := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), dir, Options{}); !errors.Is(err, ErrStateDir) {
		t.Fatalf("open: %v", err)
	}
}

// The store's budgets (issue 15): a caller's new tasks evict its own oldest
// finished ones, never another caller's within its quota and fair share
// (issue 28); a caller whose
// quota holds only running tasks is refused; the byte bound counts the
// snapshots, and a task that grows pushes finished ones out, never itself.
func TestBudgets(t *testing.T) {
	ctx := context.Background()
	done := func(id string) *a2a.Task {
		return &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}
	}
	running := func(id string) *a2a.Task {
		return &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	}
	has := func(s *Store, id string) bool {
		_, _, err := s.Get(ctx, a2a.TaskID(id))
		return err == nil
	}
	s, err := Open(ctx, t.TempDir(), Options{Capacity: 4, QuotaTasks: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Create(ctx, done("bob-result"), "bob"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s.Create(ctx, done(fmt.Sprint("alice-", i)), "alice"); err != nil {
			t.Fatalf("alice's task %d: %v", i, err)
		}
	}
	if !has(s, "bob-result") || has(s, "alice-1") || !has(s, "alice-4") {
		t.Fatal("alice's new tasks evicted bob's result, or she holds more than her quota")
	}
	// The store is full (bob's one and alice's three, all within their
	// quota): a new caller's share is 4/3 = 1, and alice's oldest, over
	// hers, makes room (issue 28: carol was refused); bob's one is his.
	if err := s.Create(ctx, running("carol-0"), "carol"); err != nil || !has(s, "bob-result") || has(s, "alice-2") || !has(s, "alice-3") {
		t.Fatalf("carol with the store full of others' tasks within their quota: %v", err)
	}
	q, err := Open(ctx, t.TempDir(), Options{Capacity: 10, QuotaTasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for i := range 2 {
		if err := q.Create(ctx, running(fmt.Sprint("carol-", i)), "carol"); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Create(ctx, running("carol-2"), "carol"); !errors.Is(err, tasks.ErrCallerQuota) {
		t.Fatalf("carol over her quota of running tasks: %v", err)
	}

	// Bytes: 3 finished tasks of about 3 KiB in an 8 KiB store.
	b, err := Open(ctx, t.TempDir(), Options{Capacity: 100, Bytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	big := func(id string, state a2a.TaskState, n int) *a2a.Task {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: strings.Repeat("x", n)})
		return &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", History: []*a2a.Message{m}, Status: a2a.TaskStatus{State: state}}
	}
	for i := range 4 {
		if err := b.Create(ctx, big(fmt.Sprint("t", i), a2a.TaskStateCompleted, 3<<10), "alice"); err != nil {
			t.Fatal(err)
		}
	}
	if has(b, "t0") || has(b, "t1") || !has(b, "t3") {
		t.Fatal("the byte bound did not evict the oldest")
	}
	if err := b.Create(ctx, big("run", a2a.TaskStateWorking, 10), "alice"); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, big("run", a2a.TaskStateWorking, 7<<10)); err != nil {
		t.Fatalf("a growth refused: %v", err)
	}
	if !has(b, "run") || has(b, "t2") || has(b, "t3") {
		t.Fatal("a growth did not push the finished tasks out, or pushed itself")
	}
	var n, bytes int64
	b.r.QueryRow(`SELECT n, bytes FROM callers WHERE owner = 'alice'`).Scan(&n, &bytes)
	var count, sum int64
	b.r.QueryRow(`SELECT count(*), coalesce(sum(size), 0) FROM tasks WHERE owner = 'alice'`).Scan(&count, &sum)
	if bytes != sum || bytes == 0 || n != count {
		t.Fatalf("the triggers count %d tasks, %d bytes; the tasks are %d, %d bytes", n, bytes, count, sum)
	}
}

// BenchmarkSend is a send's writes (Create, then the completed Put) on a
// store holding 10000 finished tasks, one sender and 16 at once.
func BenchmarkSend(b *testing.B) {
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprint("conc", conc), func(b *testing.B) {
			s, err := Open(context.Background(), b.TempDir(), Options{Capacity: 400000, Retention: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchSend(b, s, 10000, conc)
		})
	}
}

// A database of schema version 3 migrates to the callers' totals with the
// tasks it holds counted, and its quotas hold from the first create.
func TestMigrateCallers(t *testing.T) {
	ctx := context.Background()
	dir, db := databaseAt(t, 3)
	for i, owner := range []string{"alice", "alice", "bob"} {
		if _, err := db.Exec(`INSERT INTO tasks (id, owner, context_id, state, updated_ns, created_ns, finished_ns, runner, snapshot, size)
			VALUES (?, ?, 'c', 'completed', ?, ?, ?, 'gone', ?, ?)`, fmt.Sprint("old", i), owner, i, i, i, `{"id":"x"}`, 10+i); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := Open(ctx, dir, Options{Capacity: 10, QuotaTasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n, bytes int64
	if err := s.r.QueryRow(`SELECT n, bytes FROM callers WHERE owner = 'alice'`).Scan(&n, &bytes); err != nil || n != 2 || bytes != 21 {
		t.Fatalf("alice: %d tasks, %d bytes (%v); want 2, 21", n, bytes, err)
	}
	// alice is at her quota: her new task evicts her oldest finished one.
	if err := s.Create(ctx, &a2a.Task{ID: "new", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "old0"); err == nil {
		t.Fatal("alice's oldest task survived her quota")
	}
	if _, _, err := s.Get(ctx, "old2"); err != nil {
		t.Fatalf("bob's task: %v", err)
	}
}

// databaseAt is a state directory of its own whose database is at schema
// version n (its first n migrations applied and the version recorded), and
// the database open: the caller closes it before opening the store.
func databaseAt(t *testing.T, n int) (dir string, db *sql.DB) {
	t.Helper()
	dir = t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations()[:n] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, n)); err != nil {
		t.Fatal(err)
	}
	return dir, db
}
