package sqlite

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/agentd/agentd/a2a/tasks/storetest"
	"github.com/agentd/agentd/internal/testkit"
)

// The writer lets go of a batch once it has run: the tasks a batch wrote
// (each op holds its snapshot) are not kept alive by the idle writer's
// slice after a smaller batch reuses it. 64 creations at once make batches
// of several; one more, alone, follows.
func TestWriterLetsGoOfItsLastBatch(t *testing.T) {
	s := open(t, t.TempDir(), storetest.Config{Capacity: 1000})
	ctx := context.Background()
	const n = 64
	ws := make([]weak.Pointer[a2a.Task], n)
	var wg sync.WaitGroup
	for i := range n {
		tk := task(fmt.Sprint("t", i), a2a.TaskStateSubmitted, fmt.Sprint("m", i))
		ws[i] = weak.Make(tk)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Create(ctx, tk, ""); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := s.Create(ctx, task("last", a2a.TaskStateSubmitted, "mlast"), ""); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "every written task collected", func() bool {
		runtime.GC()
		for _, w := range ws {
			if w.Value() != nil {
				return false
			}
		}
		return true
	})
}
