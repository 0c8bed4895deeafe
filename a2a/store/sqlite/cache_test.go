package sqlite

import (
	"context"
	"testing"

	"github.com/agentd/agentd/a2a/tasks/storetest"
)

// TestPageCacheBounded: each connection's page cache is bounded at its own
// size (the writer 256 KiB, each reader 512 KiB, the checkpointer 256 KiB),
// where every connection could keep 16 MiB: the supervisor grew by about 90
// KiB a live task of a 64 KiB message as the caches filled (issue 35,
// figure 9); at 4 MiB, 2 MiB and 512 KiB they were still most of its 10
// MiB of growth from idle to 50 live tasks (a page cached takes 8 KiB of
// the C heap), and the writer's 1 MiB, full of the messages' overflow
// pages after a dozen tasks, 2 MiB of it.
func TestPageCacheBounded(t *testing.T) {
	s := open(t, t.TempDir(), storetest.Config{Capacity: 10})
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		kib, max int
		q        func() (int, error)
	}{
		{"writer", writerCacheKiB, 256, func() (n int, err error) { return n, s.wc.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&n) }},
		{"reader", readerCacheKiB, 512, func() (n int, err error) { return n, s.r.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&n) }},
		{"checkpointer", checkpointerCacheKiB, 256, func() (n int, err error) { return n, s.ck.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&n) }},
	} {
		n, err := tc.q()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n != -tc.kib || tc.kib > tc.max {
			t.Errorf("%s: cache_size %d, want -%d (KiB), at most %d KiB", tc.name, n, tc.kib, tc.max)
		}
	}
}
