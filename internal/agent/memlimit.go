package agent

import (
	"math"
	"runtime/debug"

	"github.com/agentd/agentd/internal/admit"
)

// fitMemoryLimit raises the child's Go memory limit, which the supervisor
// sets for a child's admitted share before any payload (GOMEMLIMIT, twice
// admit.ChildCost), to what a payload of n bytes is admitted with
// (admit.ChildCost plus admit.MessageChildFactor times its bytes): a soft
// limit below the live heap of a large conversation would keep the GC
// running. A child without a limit (none set) keeps none; a limit is never
// lowered.
func fitMemoryLimit(n int) {
	cur := debug.SetMemoryLimit(-1)
	want := int64(admit.ChildCost) + int64(admit.MessageChildFactor)*int64(n)
	if cur == math.MaxInt64 || want <= cur {
		return
	}
	debug.SetMemoryLimit(want)
}
