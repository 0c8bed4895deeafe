package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/a2a/tasks/storetest"
	"github.com/agentd/agentd/internal/pgtest"
	"github.com/agentd/agentd/internal/testkit"
)

// While PostgreSQL is stopped, a blocking send of a running task whose
// writes wait for the database, and tasks/get of that task, are answered
// ErrStoreUnavailable within the engine's store wait, not after the store
// retry of the runner's writes (a minute here), which go on in the
// background: once the database is back the task completes.
func TestAnsweredWithinTheStoreWaitWhileStopped(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	s := open(t, srv.Database(t), storetest.Config{Capacity: 100})
	const wait = 300 * time.Millisecond
	x := blockedExec{started: make(chan a2a.TaskID, 1), stop: make(chan struct{})}
	e := tasks.NewEngine(s, x, nil, tasks.WithWriteDelay(0), tasks.WithStoreRetry(time.Minute), tasks.WithStoreWait(wait))
	sent := make(chan error, 1)
	go func() {
		_, err := e.OnSendMessage(ctx, &a2a.MessageSendParams{Message: &a2a.Message{ID: "m", Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "hi"}}}})
		sent <- err
	}()
	id := <-x.started
	stopped := time.Now()
	srv.Stop()
	// Well under the store retry: the runner still retries its writes.
	const guard = 20 * time.Second
	select {
	case err := <-sent:
		if !errors.Is(err, tasks.ErrStoreUnavailable) {
			t.Fatalf("a blocking send while the database is stopped: %v, want ErrStoreUnavailable", err)
		}
		t.Logf("blocking send answered %v after the stop (store wait %v): %v", time.Since(stopped).Round(time.Millisecond), wait, err)
	case <-time.After(guard):
		t.Fatalf("a blocking send while the database is stopped: no answer in %v", guard)
	}
	got := make(chan error, 1)
	asked := time.Now()
	go func() {
		_, err := e.OnGetTask(ctx, &a2a.TaskQueryParams{ID: id})
		got <- err
	}()
	select {
	case err := <-got:
		if !errors.Is(err, tasks.ErrStoreUnavailable) {
			t.Fatalf("tasks/get while the database is stopped: %v, want ErrStoreUnavailable", err)
		}
		t.Logf("tasks/get answered in %v (store wait %v): %v", time.Since(asked).Round(time.Millisecond), wait, err)
	case <-time.After(guard):
		t.Fatalf("tasks/get while the database is stopped: no answer in %v", guard)
	}
	srv.Restart(t)
	close(x.stop)
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if task, _, err := s.Get(ctx, id); err != nil || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("once the database is back: %v %v", task, err)
	}
}

// PostgreSQL stopped three times for twice the lease under two replicas:
// after each return, each one's heartbeat renews its own lease (a renewal
// later than the database's return, by the database's clock): no heartbeat
// is left hanging on a connection the restart broke.
func TestLeasesRenewedAfterEachReturn(t *testing.T) {
	t.Parallel()
	const lease = 500 * time.Millisecond
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	ctx := context.Background()
	var instances []string
	for range 2 {
		s, err := Open(ctx, dsn, Options{Capacity: 100, LeaseTTL: lease})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		instances = append(instances, s.Instance())
	}
	for k := range 3 {
		srv.Stop()
		// The outage itself (not a wait for a condition): every lease has
		// expired when the database returns.
		time.Sleep(2 * lease)
		srv.Restart(t)
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var back time.Time
		if err := c.QueryRow(ctx, `SELECT now()`).Scan(&back); err != nil {
			t.Fatal(err)
		}
		renewed := testkit.Poll(10*time.Second, func() bool {
			var n int
			err := c.QueryRow(ctx, `SELECT count(*) FROM leases WHERE instance = ANY($1) AND heartbeat > $2`, instances, back).Scan(&n)
			return err == nil && n == len(instances)
		})
		c.Close(ctx)
		if !renewed {
			t.Fatalf("outage %d: both leases not renewed within 10s of the database's return", k+1)
		}
	}
}
