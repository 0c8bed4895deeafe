//go:build race

package budget

// raceEnabled: the race detector is on (it allocates, so allocations are
// not counted under it).
const raceEnabled = true
