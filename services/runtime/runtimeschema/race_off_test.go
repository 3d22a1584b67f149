//go:build !race

package runtimeschema

// raceEnabled: the race detector is off (TestCorpus runs the whole corpus).
const raceEnabled = false
