//go:build !race

package server

// raceEnabled: the race detector is on (it allocates, and sync.Pool drops
// some of what it is given, so allocations are not counted under it).
const raceEnabled = false
