//go:build !race

package a2abind

const raceEnabled = false
