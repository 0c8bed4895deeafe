//go:build race

package api

// raceOn: the race detector is on (sync.Pool drops items at random, so
// allocation counts do not hold).
const raceOn = true
