//go:build race

package agent

// raceEnabled says whether the race detector is on: then sync.Pool drops
// some of what is put back, and what a call allocates is not the same
// twice.
const raceEnabled = true
