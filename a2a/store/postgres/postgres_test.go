package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/a2a/tasks/storetest"
	"github.com/agentd/agentd/internal/pgtest"
)

func open(t *testing.T, dsn string, cfg storetest.Config) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{Capacity: cfg.Capacity, Retention: cfg.Retention, QuotaTasks: cfg.QuotaTasks, Bytes: cfg.Bytes, Now: cfg.Clock, LeaseTTL: 3 * time.Second, AuditKeep: cfg.AuditKeep, AuditMaxAge: cfg.AuditMaxAge})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The PostgreSQL store passes the conformance suite, each test on a database
// of its own of one real server; a reopen is the next replica.
func TestConformance(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	dsns := map[*Store]string{}
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T, cfg storetest.Config) tasks.Store {
			dsn := srv.Database(t)
			s := open(t, dsn, cfg)
			dsns[s] = dsn
			return s
		},
		Reopen: func(t *testing.T, old tasks.Store, cfg storetest.Config) tasks.Store {
			s := old.(*Store)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			next := open(t, dsns[s], cfg)
			dsns[next] = dsns[s]
			return next
		},
	})
}

// A database a newer agentd wrote is refused and left as it is; a database
// that cannot be reached or written is ErrUnreachable.
func TestOpenRefusals(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	dsn := srv.Database(t)
	open(t, dsn, storetest.Config{}).Close()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "UPDATE agentd_schema SET version = 99"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, dsn, Options{})
	var se *store.SchemaError
	if !errors.As(err, &se) || se.Found != 99 {
		t.Fatalf("newer schema: %v", err)
	}
	ro := srv.Database(t)
	c2, _ := pgx.Connect(ctx, ro)
	c2.Exec(ctx, "ALTER DATABASE "+c2.Config().Database+" SET default_transaction_read_only = on")
	c2.Close(ctx)
	if _, err := Open(ctx, ro, Options{}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("read-only database: %v", err)
	}
	srv.Stop()
	if _, err := Open(ctx, dsn, Options{}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("stopped server: %v", err)
	}
}

// BenchmarkSend is a send's writes (Create, then the completed Put) on a
// durable server (fsync and synchronous commits on) holding 2000 finished
// tasks, one sender and 16 at once; "budgets" with serve's budgets of a
// 1 GiB pod (10000 tasks, 64 MiB, a caller's quota 1250 tasks and 9 MiB),
// where the sender's every create finds its quota full and evicts its own
// oldest.
func BenchmarkSend(b *testing.B) {
	srv, err := pgtest.New(pgtest.Options{Durable: true})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	for _, c := range []struct {
		name string
		o    Options
	}{
		{"conc1", Options{Capacity: 400000}},
		{"conc16", Options{Capacity: 400000}},
		{"budgets/conc1", Options{Capacity: 10000, Bytes: 64 << 20, QuotaTasks: 1250, QuotaBytes: 9 << 20}},
		{"budgets/conc16", Options{Capacity: 10000, Bytes: 64 << 20, QuotaTasks: 1250, QuotaBytes: 9 << 20}},
	} {
		conc := 1
		if strings.HasSuffix(c.name, "16") {
			conc = 16
		}
		b.Run(c.name, func(b *testing.B) {
			dsn, err := srv.NewDatabase()
			if err != nil {
				b.Fatal(err)
			}
			o := c.o
			o.Retention = time.Hour
			s, err := Open(context.Background(), dsn, o)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchSend(b, s, 2000, conc)
		})
	}
}

// The store's budgets (issue 15), as the embedded store keeps them: with
// capacity 5, one caller's five new tasks evict its own oldest finished
// ones, never another caller's result within its quota; the store full of
// tasks within their callers' quotas makes room for a new caller out of a
// caller's over its fair share; a caller whose
// quota holds only running tasks is refused; the byte bound counts the
// snapshots, and a task that grows pushes finished ones out, never itself.
func TestBudgets(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
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
	openOn := func(dsn string, o Options) *Store {
		o.LeaseTTL = 3 * time.Second
		s, err := Open(ctx, dsn, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	openWith := func(o Options) *Store { return openOn(srv.Database(t), o) }
	s := openWith(Options{Capacity: 5, QuotaTasks: 4})
	if err := s.Create(ctx, done("bob-result"), "bob"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s.Create(ctx, done(fmt.Sprint("alice-", i)), "alice"); err != nil {
			t.Fatalf("alice's task %d: %v", i, err)
		}
	}
	if !has(s, "bob-result") || has(s, "alice-0") || !has(s, "alice-1") || !has(s, "alice-4") {
		t.Fatal("alice's new tasks evicted bob's result, or she holds more than her quota")
	}
	// The store is full (bob's one and alice's four, all within their
	// quota): a new caller's share is 5/3 = 1, and alice's oldest, over
	// hers, makes room (issue 28: carol was refused); bob's one is his.
	if err := s.Create(ctx, running("carol-0"), "carol"); err != nil || !has(s, "bob-result") || has(s, "alice-1") || !has(s, "alice-2") {
		t.Fatalf("carol with the store full of others' tasks within their quota: %v", err)
	}
	// Two replicas of one database: alice's creates from both at once keep
	// her quota (her creates take one lock), and bob's result stays.
	dsn := srv.Database(t)
	replicas := []*Store{openOn(dsn, Options{Capacity: 5, QuotaTasks: 4}), openOn(dsn, Options{Capacity: 5, QuotaTasks: 4})}
	if err := replicas[0].Create(ctx, done("bob-result"), "bob"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*8*4)
	for r, rs := range replicas {
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 8 {
					if err := rs.Create(ctx, done(fmt.Sprintf("alice-%d-%d-%d", r, w, i)), "alice"); err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("alice's concurrent creates: %v", err)
	}
	var alice int
	if err := replicas[1].pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE owner = 'alice'`).Scan(&alice); err != nil {
		t.Fatal(err)
	}
	if alice != 4 || !has(replicas[1], "bob-result") {
		t.Fatalf("after alice's concurrent creates from two replicas: she holds %d tasks (quota 4), bob's result kept: %v", alice, has(replicas[1], "bob-result"))
	}
	q := openWith(Options{Capacity: 10, QuotaTasks: 2})
	for i := range 2 {
		if err := q.Create(ctx, running(fmt.Sprint("carol-", i)), "carol"); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Create(ctx, running("carol-2"), "carol"); !errors.Is(err, tasks.ErrCallerQuota) {
		t.Fatalf("carol over her quota of running tasks: %v", err)
	}
	if err := q.Create(ctx, running("dave-0"), "dave"); err != nil {
		t.Fatalf("dave, within his quota, after carol was refused: %v", err)
	}

	// Bytes: 3 finished tasks of about 3 KiB in an 8 KiB store.
	b := openWith(Options{Capacity: 100, Bytes: 8 << 10})
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
	// A payload larger than the snapshot counts for the task (once: the
	// larger of the two).
	if err := b.Retain(ctx, "run", make([]byte, 9<<10)); err != nil {
		t.Fatal(err)
	}
	var bytes, sum int64
	if err := b.pool.QueryRow(ctx, `SELECT (SELECT sum(bytes) FROM task_count), (SELECT coalesce(sum(size), 0) FROM tasks)`).Scan(&bytes, &sum); err != nil {
		t.Fatal(err)
	}
	if bytes != sum || bytes < 9<<10 {
		t.Fatalf("the trigger counts %d bytes, the tasks hold %d", bytes, sum)
	}
}

// A database of schema version 3 with tasks in it is migrated to version 4
// with every task's size and the count's bytes filled in.
func TestMigrateBudgets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, c := databaseAt(t, 3)
	for i := range 20 {
		if _, err := c.Exec(ctx, `INSERT INTO tasks (id, owner, context_id, state, updated_ns, created_ns, finished_ns, runner, snapshot, payload)
			VALUES ($1, 'alice', 'c', 'completed', 1, 1, 1, 'old', $2, $3)`, fmt.Sprint("t", i), make([]byte, 100+i), make([]byte, i)); err != nil {
			t.Fatal(err)
		}
	}
	s := open(t, dsn, storetest.Config{})
	var bytes, sum, bad int64
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT sum(bytes) FROM task_count), (SELECT sum(size) FROM tasks),
		(SELECT count(*) FROM tasks WHERE size <> octet_length(snapshot) + octet_length(payload))`).Scan(&bytes, &sum, &bad); err != nil {
		t.Fatal(err)
	}
	if want := int64(20*100 + 2*190); bytes != want || sum != want || bad != 0 {
		t.Fatalf("after the migration the count holds %d bytes, the tasks %d (%d sized wrong), want %d", bytes, sum, bad, want)
	}
}

// databaseAt is a fresh database of its own PostgreSQL at schema version n
// (its first n migrations applied and the version recorded), and a
// connection to it, closed at the test's end.
func databaseAt(t *testing.T, n int) (dsn string, c *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	dsn = pgtest.Start(t).Database(t)
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	for _, m := range migrations()[:n] {
		if _, err := c.Exec(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Exec(ctx, fmt.Sprintf(`CREATE TABLE agentd_schema (version int NOT NULL); INSERT INTO agentd_schema VALUES (%d)`, n)); err != nil {
		t.Fatal(err)
	}
	return dsn, c
}
