package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
)

// The queries of finished tasks (expiry, prune, eviction) seek
// tasks_owner_finished once per caller: none scans the tasks.
func TestFinishedPlans(t *testing.T) {
	s, err := Open(context.Background(), t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []string{
		`DELETE FROM tasks WHERE rowid IN (` + finishedByCutSQL + `)`,
		`DELETE FROM tasks WHERE rowid = (` + oldestOthersSQL + ` ORDER BY t.finished_ns, t.rowid LIMIT 1)`,
		`DELETE FROM tasks WHERE rowid = (` + oldestOthersSQL + ` AND (c.n > 1 OR c.bytes > 1) ORDER BY t.finished_ns, t.rowid LIMIT 1)`,
		`DELETE FROM blobs WHERE owner IN (SELECT id FROM tasks WHERE rowid IN (` + finishedByCutSQL + `))`,
	} {
		rows, err := s.r.Query(`EXPLAIN QUERY PLAN `+q, 1, 1)
		if err != nil {
			rows, err = s.r.Query(`EXPLAIN QUERY PLAN `+q, 1)
		}
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		all := strings.Join(plan, "; ")
		if !strings.Contains(all, "tasks_owner_finished (owner=?") || strings.Contains(all, "SCAN t;") || strings.Contains(all, "SCAN tasks") || strings.HasSuffix(all, "SCAN t") {
			t.Errorf("%s\n  plan: %s", q, all)
		}
	}
}

// A state directory of schema version 4 migrates to one index of finished
// tasks, and its tasks expire, make room and are pruned in the same order as
// before: the oldest finished of anyone's (other callers' when a caller
// has none of its own), whoever holds it.
func TestMigrateFinished(t *testing.T) {
	ctx := context.Background()
	dir, db := databaseAt(t, 4)
	base := time.Now().Add(-time.Hour).UnixNano()
	// finished at base+i seconds: bob's old1 is the oldest, then alice's.
	for _, r := range []struct {
		id, owner string
		at        int
	}{{"old1", "bob", 1}, {"old2", "alice", 2}, {"old3", "alice", 3}, {"old4", "bob", 4}, {"old5", "carol", 5}} {
		at := base + int64(r.at)*int64(time.Second)
		if _, err := db.Exec(`INSERT INTO tasks (id, owner, context_id, state, updated_ns, created_ns, finished_ns, runner, snapshot, size)
			VALUES (?, ?, 'c', 'completed', ?, ?, ?, 'gone', ?, 10)`, r.id, r.owner, at, at, at, fmt.Sprintf(`{"id":%q,"contextId":"c","status":{"state":"completed"}}`, r.id)); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	s, err := Open(ctx, dir, Options{Capacity: 5})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.r.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'tasks_finished'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("tasks_finished after the migration: %d (%v)", n, err)
	}
	var v int
	if err := s.r.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != SchemaVersion || v < 5 {
		t.Fatalf("schema version %d (%v)", v, err)
	}
	has := func(s *Store, id string) bool {
		_, _, err := s.Get(ctx, a2a.TaskID(id))
		return err == nil
	}
	// dave holds nothing: the store's oldest finished task (bob's) goes.
	if err := s.Create(ctx, task("dave-1", a2a.TaskStateWorking, ""), "dave"); err != nil {
		t.Fatal(err)
	}
	if has(s, "old1") || !has(s, "old2") {
		t.Fatal("a new caller's task did not evict the oldest finished one of the others")
	}
	// carol holds a finished task: her own goes first, not alice's older.
	if err := s.Create(ctx, task("carol-1", a2a.TaskStateWorking, ""), "carol"); err != nil {
		t.Fatal(err)
	}
	if has(s, "old5") || !has(s, "old2") {
		t.Fatal("carol's task did not evict her own finished one first")
	}
	s.Close()

	// Retention: what finished more than 30 minutes ago expires at the
	// next create, whoever holds it; prune takes what is older than its cut.
	r, err := Open(ctx, dir, Options{Capacity: 100, Retention: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Create(ctx, task("erin-1", a2a.TaskStateCompleted, ""), "erin"); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, err := r.r.Query(`SELECT id FROM tasks ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		left = append(left, id)
	}
	rows.Close()
	if strings.Join(left, ",") != "carol-1,dave-1,erin-1" {
		t.Fatalf("after expiry the store holds %v", left)
	}
	p, err := r.Prune(ctx, time.Now().Add(time.Minute))
	if err != nil || p.Tasks != 1 || has(r, "erin-1") || !has(r, "dave-1") {
		t.Fatalf("prune: %+v %v", p, err)
	}
}
