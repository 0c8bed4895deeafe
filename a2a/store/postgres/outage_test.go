package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/a2a/tasks/storetest"
	"github.com/agentd/agentd/internal/pgtest"
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
