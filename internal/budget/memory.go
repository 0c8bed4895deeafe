package budget

// The stores' default byte bounds, from the memory the supervisor keeps for
// itself: the reserve admission control's derivation leaves it out of the
// memory limit (admit.Derive: max(96 MiB, limit/4); the rest is for subagent
// processes).
//
//	task store bytes   = reserve/4, within [16 MiB, 1 GiB]
//	blob store bytes   = reserve/8, within [8 MiB, 512 MiB]
//
// Go's heap may hold twice its live data before a collection (GOGC=100), so
// the two stores at their bounds take at most 2 x (1/4 + 1/8) = 3/4 of the
// reserve; the last quarter is the runtime, the front's request buffers and
// the supervisor's own state. For a 1 GiB pod: reserve 256 MiB, a 64 MiB task
// store and a 32 MiB blob store.

// MiB is a mebibyte.
const MiB = 1 << 20

// TaskStoreBytes returns the task store's default byte bound for the
// supervisor's reserve.
func TaskStoreBytes(reserve uint64) int64 {
	return int64(min(max(reserve/4, 16*MiB), 1024*MiB))
}

// BlobStoreBytes returns the blob store's default byte bound for the
// supervisor's reserve.
func BlobStoreBytes(reserve uint64) int64 {
	return int64(min(max(reserve/8, 8*MiB), 512*MiB))
}
