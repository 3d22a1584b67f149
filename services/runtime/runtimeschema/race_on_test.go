//go:build race

package runtimeschema

// raceEnabled: the race detector is on (TestCorpus runs its short form).
const raceEnabled = true
