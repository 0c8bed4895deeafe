package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/store"
	"github.com/agentd/agentd/a2a/tasks"
)

// task is a task of state with its first message's id msg.
func task(id string, state a2a.TaskState, msg string) *a2a.Task {
	t := &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: state}}
	if msg != "" {
		t.History = []*a2a.Message{{ID: msg, Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.TextPart{Text: "hi"}}}}
	}
	return t
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

// Issue 28, by bytes: callers each within their byte quota filled the store,
// and a new caller was refused. Its fair share of the bytes is the bound
// divided by the three callers: alice and bob hold more, and the oldest
// finished task of theirs makes room.
func TestCreateRoomFairShareOfBytes(t *testing.T) {
	ctx := context.Background()
	done := func(i int) *a2a.Task { return task(fmt.Sprint("t", i), a2a.TaskStateCompleted, fmt.Sprint("m", i)) }
	b, err := store.EncodeTask(done(0))
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(b)) // every done(i) for i < 10 has this size
	s, err := Open(ctx, t.TempDir(), Options{Capacity: 100, Bytes: 4 * size, QuotaBytes: 2 * size})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, owner := range []string{"alice", "bob", "alice", "bob"} {
		if err := s.Create(ctx, done(i), owner); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Create(ctx, done(8), "carol"); err != nil {
		t.Fatalf("a new caller, the store full of tasks within their byte quota: %v", err)
	}
	for id, want := range map[string]bool{"t0": false, "t1": true, "t2": true, "t3": true, "t8": true} {
		if _, _, err := s.Get(ctx, a2a.TaskID(id)); (err == nil) != want {
			t.Errorf("%s held: %v, want %v", id, err == nil, want)
		}
	}
}
