package agent

import (
	"math"
	"runtime"
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

// wideProcsBytes is the spawn payload from which a child runs with the
// runtime's default GOMAXPROCS rather than the one P its supervisor gives it
// (Config.ChildGOMAXPROCS): decoding and encoding megabytes of JSON, and the
// collections they bring, are slower on one P, while a conversation under it
// (figure 9's 64 KiB) is a wait.
const wideProcsBytes = 1 << 20

// fitProcs returns a child whose spawn payload is n bytes to the runtime's
// default GOMAXPROCS (runtime.SetDefaultGOMAXPROCS, which ignores the
// environment's) when n is at least wideProcsBytes; a smaller payload keeps
// the GOMAXPROCS the child was started with.
func fitProcs(n int) {
	if n >= wideProcsBytes {
		runtime.SetDefaultGOMAXPROCS()
	}
}
