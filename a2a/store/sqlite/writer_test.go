package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

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

// Under a steady load, with the writer never idle long enough for a
// passive checkpoint to copy the whole WAL, the WAL still starts over: its
// file stays a fraction of what the sends wrote (before, it held every
// frame of every commit until the load paused).
func TestWALRestartsUnderLoad(t *testing.T) {
	interval, frames := checkpointInterval, restartFrames
	checkpointInterval, restartFrames = 5*time.Millisecond, 64
	defer func() { checkpointInterval, restartFrames = interval, frames }()
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Options{Capacity: 100000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const senders, each = 4, 500
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := a2a.TaskID(fmt.Sprintf("t%d-%d", g, i))
				task := &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
				if err := s.Create(ctx, task, "alice"); err != nil {
					t.Error(err)
					return
				}
				done := *task
				done.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted}
				if err := s.Put(ctx, &done); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// What the sends wrote: at least a frame (a page and its header) a
	// send, the least the WAL would hold had it never started over (it holds
	// about eight a send then). How far below that it stays depends on how
	// soon the checkpoints run, which a loaded machine delays (4.75 MB of
	// 8.2 seen under a parallel make test): only a WAL as long as every send
	// together proves it never started over.
	var pageSize int64
	if err := s.r.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	written := int64(senders*each) * (pageSize + 24)
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() >= written {
		t.Fatalf("the WAL is %d bytes after sends that wrote at least %d: it never started over", fi.Size(), written)
	}
}
