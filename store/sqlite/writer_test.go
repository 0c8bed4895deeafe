package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/store"
	"github.com/agentd/agentd/tasks"
)

// task is a task of state with its first message's id msg.
func task(id string, state a2a.TaskState, msg string) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: state}}
	if msg != "" {
		t.History = []*a2a.Message{{ID: msg, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "hi"}}}}
	}
	return t
}

// committedState reads a task's state through a connection of its own, as
// another process would: only what was committed.
func committedState(t *testing.T, s *Store, id string) string {
	t.Helper()
	db, err := sql.Open("sqlite", s.path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var state string
	if err := db.QueryRow(`SELECT state FROM tasks WHERE id = ?`, id).Scan(&state); err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return state
}

// A task's terminal snapshot waits for the ends of the tasks staged beside
// it, is answered only once committed, and one commit stores them all; a
// sync does not wait.
func TestCommitDelay(t *testing.T) {
	ctx := context.Background()
	// Delays far longer than the test: only the writes' own ends commit.
	held := make(chan struct{}, 10)
	s, err := Open(ctx, t.TempDir(), Options{stageLinger: time.Hour, commitDelay: time.Hour, onHold: func() { held <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"a", "b"} {
		if err := s.Create(ctx, task(id, a2a.TaskStateSubmitted, ""), "alice"); err != nil {
			t.Fatal(err)
		}
	}
	before := s.commits.Load()
	putA := make(chan error, 1)
	go func() { putA <- s.Put(ctx, task("a", a2a.TaskStateCompleted, "")) }()
	// a's end is held while b has not ended; a reader on its own connection
	// sees neither (nothing was committed, nothing answered).
	select {
	case <-held:
	case err := <-putA:
		t.Fatalf("a's end answered before b ended (%v)", err)
	}
	select {
	case err := <-putA:
		t.Fatalf("a's end answered before b ended (%v)", err)
	default:
	}
	if st := committedState(t, s, "a"); st != "" {
		t.Fatalf("a was committed (%q) before the transaction's end", st)
	}
	if err := s.Put(ctx, task("b", a2a.TaskStateCompleted, "")); err != nil {
		t.Fatal(err)
	}
	if err := <-putA; err != nil {
		t.Fatal(err)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Fatalf("%d commits for the two tasks; want 1", n)
	}
	for _, id := range []string{"a", "b"} {
		if st := committedState(t, s, id); st != string(a2a.TaskStateCompleted) {
			t.Fatalf("task %s committed as %q", id, st)
		}
	}

	// A staged task that has not ended does not hold up a sync (what a
	// reader waits for): it commits at once.
	if err := s.Create(ctx, task("c", a2a.TaskStateSubmitted, ""), "alice"); err != nil {
		t.Fatal(err)
	}
	synced := make(chan error, 1)
	go func() { synced <- s.Sync(ctx) }()
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a sync waited for a staged task's end")
	}
	if st := committedState(t, s, "c"); st != string(a2a.TaskStateSubmitted) {
		t.Fatalf("c after the sync: %q", st)
	}

	// A held end that Close finds waiting is committed and answered.
	if err := s.Create(ctx, task("d", a2a.TaskStateSubmitted, ""), "alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, task("e", a2a.TaskStateSubmitted, ""), "alice"); err != nil {
		t.Fatal(err)
	}
	putD := make(chan error, 1)
	go func() { putD <- s.Put(ctx, task("d", a2a.TaskStateCompleted, "")) }()
	select {
	case <-held:
	case err := <-putD:
		t.Fatalf("d's end answered before e ended (%v)", err)
	}
	s.Close()
	if err := <-putD; err != nil {
		t.Fatal(err)
	}
	if st := committedState(t, s, "d"); st != string(a2a.TaskStateCompleted) {
		t.Fatalf("d answered, committed as %q", st)
	}
}

// A new task that fits exactly takes no one's place; one byte or one task
// more evicts the oldest finished; a duplicate message in a full store is
// the existing task, and evicts nothing.
func TestCreateRoom(t *testing.T) {
	ctx := context.Background()
	snapSize := func(t2 *a2a.Task) int64 {
		b, err := store.EncodeTask(t2)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(b))
	}
	done := func(i int) *a2a.Task { return task(fmt.Sprint("t", i), a2a.TaskStateCompleted, fmt.Sprint("m", i)) }
	size := snapSize(done(0)) // every done(i) for i < 10 has this size
	for _, quota := range []bool{false, true} {
		t.Run(fmt.Sprint("quota=", quota), func(t *testing.T) {
			o := Options{Capacity: 3, Bytes: 3 * size}
			if quota {
				o = Options{Capacity: 100, QuotaTasks: 3, QuotaBytes: 3 * size}
			}
			s, err := Open(ctx, t.TempDir(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			has := func(id string) bool {
				_, _, err := s.Get(ctx, a2a.TaskID(id))
				return err == nil
			}
			for i := range 3 {
				if err := s.Create(ctx, done(i), "alice"); err != nil {
					t.Fatal(err)
				}
			}
			if !has("t0") || !has("t1") || !has("t2") {
				t.Fatal("tasks that fit exactly evicted one")
			}
			// The same message again: the existing task, nothing evicted.
			dup := done(3)
			dup.History[0].ID = "m1"
			var de *tasks.DuplicateError
			if err := s.Create(ctx, dup, "alice"); !errors.As(err, &de) || de.Existing != "t1" {
				t.Fatalf("a duplicate message in a full store: %v", err)
			}
			if !has("t0") || has("t3") {
				t.Fatal("a refused duplicate evicted a task or was stored")
			}
			if err := s.Create(ctx, done(3), "alice"); err != nil {
				t.Fatal(err)
			}
			if has("t0") || !has("t1") || !has("t3") {
				t.Fatal("one task more did not evict exactly the oldest")
			}
			// One byte more than the bound leaves: the two oldest go.
			bigger := task("t9", a2a.TaskStateCompleted, "m9x")
			if snapSize(bigger) != size+1 {
				t.Fatalf("test task sizes %d, %d", snapSize(bigger), size)
			}
			if err := s.Create(ctx, bigger, "alice"); err != nil {
				t.Fatal(err)
			}
			if has("t1") || has("t2") || !has("t3") || !has("t9") {
				t.Fatal("a task one byte over the room did not evict the two oldest")
			}
		})
	}
}
