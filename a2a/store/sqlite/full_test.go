package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks"
	"github.com/agentd/agentd/internal/testkit"
)

// On a full disk, staged creations from many goroutines at once: the
// commits fail, some at a Sync (the creation's caller waits for it), some
// at the linger's end before anyone syncs (the caller syncs after, the
// issue's case: Sync found nothing staged and said the task was stored).
// Every creation SyncTask acknowledged is in the store once the disk has
// room again; every other was refused as the store's unavailability, and is
// not.
func TestFullDiskLosesNoSyncedCreation(t *testing.T) {
	dir := testkit.SmallFS(t, 2<<20)
	ctx := context.Background()
	s, err := Open(ctx, dir, Options{Capacity: 100000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	filler := testkit.Fill(t, dir, 256<<10) // room for some of the creations
	const senders, each = 8, 25
	text := strings.Repeat("x", 6<<10) // more than the WAL's free pages hold, soon
	var mu sync.Mutex
	var acked, refused []string
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("t%d-%d", g, i)
				tk := task(id, a2a.TaskStateSubmitted, "m"+id)
				tk.History[0].Parts = a2a.ContentParts{a2a.TextPart{Text: text}}
				err := s.Create(ctx, tk, "")
				if err == nil {
					if g%2 == 1 {
						// The linger's commit (or another's) ends the
						// transaction before this caller syncs.
						if !testkit.Poll(5*time.Second, func() bool { return !s.staged.Load() }) {
							t.Errorf("create %s: its transaction neither committed nor failed within 5s", id)
						}
					}
					err = s.SyncTask(ctx, a2a.TaskID(id))
				}
				mu.Lock()
				if err == nil {
					acked = append(acked, id)
				} else {
					if !errors.Is(err, tasks.ErrStoreUnavailable) {
						t.Errorf("create %s on a full disk: %v, not the store's unavailability", id, err)
					}
					refused = append(refused, id)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, id := range acked {
		if _, _, err := s.Get(ctx, a2a.TaskID(id)); err != nil {
			lost++
			t.Logf("acknowledged %s, then: %v", id, err)
		}
	}
	for _, id := range refused {
		if _, _, err := s.Get(ctx, a2a.TaskID(id)); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("refused %s, then: %v, want not found", id, err)
		}
	}
	t.Logf("%d creations on a full disk: %d acknowledged (%d of them lost), %d refused", senders*each, len(acked), lost, len(refused))
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged creations were lost", lost, len(acked))
	}
	if len(refused) == 0 {
		t.Fatal("no creation was refused: the disk was never full")
	}
}
