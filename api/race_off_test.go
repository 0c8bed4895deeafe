//go:build !race

package api

const raceOn = false
