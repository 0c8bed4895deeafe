//go:build !race

package supervisor

// raceEnabled: the race detector is on (its instrumentation grows stack
// frames, so stack sizes are not measured under it).
const raceEnabled = false
