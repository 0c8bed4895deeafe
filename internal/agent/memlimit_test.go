package agent

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/agentd/agentd/internal/admit"
)

// A child's Go memory limit follows its payload: a large conversation
// raises it to the share admission gave the run, a small one keeps the
// supervisor's, and a child with no limit gets none.
func TestFitMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	const base = 16 << 20
	for _, c := range []struct {
		limit int64
		n     int
		want  int64
	}{
		{base, 4 << 20, int64(admit.ChildCost) + admit.MessageChildFactor*(4<<20)},
		{base, 64 << 10, base},
		{math.MaxInt64, 4 << 20, math.MaxInt64},
	} {
		debug.SetMemoryLimit(c.limit)
		fitMemoryLimit(c.n)
		if got := debug.SetMemoryLimit(-1); got != c.want {
			t.Errorf("limit %d, payload %d bytes: %d, want %d", c.limit, c.n, got, c.want)
		}
	}
}
