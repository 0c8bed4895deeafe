package postgres

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

// PostgreSQL stopped for twice the lease under two live replicas, A and B,
// each running a task, beside the task of a replica that is gone: once the
// database is back, every heartbeat it holds is older than the lease, yet
// neither replica lists the other's task as an orphan (each was cut off
// and holds off for a lease while the other renews), nor deletes the
// other's watch of its task; the gone replica's task is listed again once
// they judge leases again.
func TestNoOrphansOfLiveReplicasAfterAnOutage(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	ctx := context.Background()
	var stores []*Store
	for range 2 {
		s, err := Open(ctx, dsn, Options{Capacity: 100, LeaseTTL: lease})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
		if err := s.Create(ctx, task("run by "+s.Instance(), a2a.TaskStateWorking), "o"); err != nil {
			t.Fatal(err)
		}
	}
	// The gone replica's task: its runner changed by an operator's
	// connection (not fenced), to a lease an hour old.
	if err := stores[0].Create(ctx, task("gone's", a2a.TaskStateWorking), "o"); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, `INSERT INTO leases (instance, heartbeat, started) VALUES ('gone', now() - interval '1 hour', now() - interval '2 hours')`)
	if err == nil {
		_, err = c.Exec(ctx, `UPDATE tasks SET runner = 'gone' WHERE id = 'gone''s'`)
	}
	c.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Each replica watches the other's task.
	wctx, unwatch := context.WithCancel(ctx)
	defer unwatch()
	stores[0].Watch(wctx, a2a.TaskID("run by "+stores[1].Instance()))
	stores[1].Watch(wctx, a2a.TaskID("run by "+stores[0].Instance()))
	// orphans lists what s judges orphaned: nothing but the gone
	// replica's task, ever; it reports whether s listed that one.
	orphans := func(s *Store) bool {
		list, err := s.Orphans(ctx)
		if err != nil {
			return false // the database is not back yet
		}
		for _, o := range list {
			if o.Task.ID != "gone's" {
				t.Fatalf("%s lists %s's task %s as an orphan", s.Instance(), o.Runner, o.Task.ID)
			}
		}
		return len(list) == 1
	}
	testkit.WaitFor(t, 10*time.Second, "the gone replica's task an orphan", func() bool { return orphans(stores[0]) && orphans(stores[1]) })

	srv.Stop()
	// The outage itself (not a wait for a condition): twice the lease.
	time.Sleep(2 * lease)
	srv.Restart(t)
	testkit.WaitFor(t, 30*time.Second, "the gone replica's task an orphan again", func() bool { return orphans(stores[0]) && orphans(stores[1]) })
	c, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var watches int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM task_watchers`).Scan(&watches); err != nil || watches != 2 {
		t.Fatalf("the replicas' watches after the outage: %d %v, want both", watches, err)
	}
}

// The judge's rule, on a fake clock: a replica judges leases from the lease
// taken on; not while its renewals fail, nor after one that came more than
// half a lease after the one before, until a lease after the contact
// returned; a renewal's delay within half a lease changes nothing.
func TestContactJudgesAfterALeaseOfContact(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		c := newContact(lease)
		want := func(step string, judge bool) {
			t.Helper()
			if got := c.mayJudge(); got != judge {
				t.Fatalf("%s: mayJudge %v, want %v", step, got, judge)
			}
		}
		want("at the lease taken", true)
		time.Sleep(lease / 3)
		if gap := c.renewed(); gap != 0 {
			t.Fatalf("a renewal on time: broken for %s", gap)
		}
		want("renewed on time", true)
		time.Sleep(lease/2 + time.Millisecond)
		want("half a lease without a renewal", false)
		if gap := c.renewed(); gap != lease/2+time.Millisecond {
			t.Fatalf("a renewal after half a lease: broken for %s", gap)
		}
		want("renewed late", false)
		time.Sleep(lease / 3)
		c.renewed()
		if !c.failed() || c.failed() {
			t.Fatal("failed reports the first failure of a break alone")
		}
		want("a renewal failed", false)
		time.Sleep(lease / 9)
		if gap := c.renewed(); gap != lease/9 {
			t.Fatalf("a renewal after a failed one: broken for %s", gap)
		}
		for range 2 {
			time.Sleep(lease / 3)
			c.renewed()
			want("within a lease of the contact's return", false)
		}
		time.Sleep(lease / 3)
		c.renewed()
		want("a lease after the contact's return", true)
	})
}
