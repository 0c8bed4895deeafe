package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
)

// Writes from many goroutines at once, some run on their callers'
// goroutines (the writer idle) and some queued for the writer, while the
// store closes: every write answered without an error is in the database
// when it opens again, and every other one was refused as closed.
func TestWritersAndClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, dir, Options{Capacity: 100000})
	if err != nil {
		t.Fatal(err)
	}
	const senders, each = 8, 200
	var mu sync.Mutex
	acked := map[string]a2a.TaskState{}
	var wg sync.WaitGroup
	started := make(chan struct{})
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if i == each/4 && g == 0 {
					close(started)
				}
				id := fmt.Sprintf("g%d-%d", g, i)
				if err := s.Create(ctx, task(id, a2a.TaskStateSubmitted, id), "alice"); err != nil {
					if !errors.Is(err, errClosed) {
						t.Errorf("create %s: %v", id, err)
					}
					return
				}
				if err := s.Sync(ctx); err != nil {
					if !errors.Is(err, errClosed) {
						t.Errorf("sync %s: %v", id, err)
					}
					return
				}
				mu.Lock()
				acked[id] = a2a.TaskStateSubmitted
				mu.Unlock()
				if err := s.Put(ctx, task(id, a2a.TaskStateCompleted, id)); err != nil {
					if !errors.Is(err, errClosed) {
						t.Errorf("put %s: %v", id, err)
					}
					return
				}
				mu.Lock()
				acked[id] = a2a.TaskStateCompleted
				mu.Unlock()
			}
		}()
	}
	<-started
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	r, err := Open(ctx, dir, Options{Capacity: 100000})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(acked) == 0 {
		t.Fatal("no write was answered before the close")
	}
	for id, want := range acked {
		got, _, err := r.Get(ctx, a2a.TaskID(id))
		if err != nil {
			t.Fatalf("acknowledged task %s: %v", id, err)
		}
		// A put answered is stored; one refused may have been stored too.
		if want == a2a.TaskStateCompleted && got.Status.State != want {
			t.Fatalf("task %s is %s; its completion was acknowledged", id, got.Status.State)
		}
	}
}
