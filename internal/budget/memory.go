package budget

// The stores' default byte bounds for a memory limit (the cgroup's, or the
// machine's: package memlimit reads it).
//
//	reserve            = max(96 MiB, limit/4)            what the supervisor keeps for itself
//	task store bytes   = reserve/4, within [16 MiB, 1 GiB]
//	blob store bytes   = reserve/8, within [8 MiB, 512 MiB]
//
// The reserve is the figure the service's admission bounds leave the
// supervisor (admit.Derive: the rest of the limit is for subagent processes).
// Go's heap may hold twice its live data before a collection (GOGC=100), so
// the two stores at their bounds take at most 2 x (1/4 + 1/8) = 3/4 of the
// reserve; the last quarter is the runtime, the front's request buffers and
// the supervisor's own state. For a 1 GiB pod: reserve 256 MiB, a 64 MiB task
// store and a 32 MiB blob store.

// MiB is a mebibyte.
const MiB = 1 << 20

// Reserve returns the memory the supervisor keeps for itself out of limit.
func Reserve(limit uint64) uint64 { return max(96*MiB, limit/4) }

// TaskStoreBytes returns the task store's default byte bound for limit.
func TaskStoreBytes(limit uint64) int64 {
	return int64(min(max(Reserve(limit)/4, 16*MiB), 1024*MiB))
}

// BlobStoreBytes returns the blob store's default byte bound for limit.
func BlobStoreBytes(limit uint64) int64 {
	return int64(min(max(Reserve(limit)/8, 8*MiB), 512*MiB))
}
