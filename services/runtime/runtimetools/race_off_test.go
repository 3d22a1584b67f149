//go:build !race

package runtimetools

// raceEnabled: the race detector is off.
const raceEnabled = false
