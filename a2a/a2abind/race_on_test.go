//go:build race

package a2abind

// raceEnabled: the race detector is on (its instrumentation grows stack
// frames, so stack sizes are not measured under it).
const raceEnabled = true
