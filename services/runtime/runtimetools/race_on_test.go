//go:build race

package runtimetools

// raceEnabled: the race detector is on (TestReadFileFollowHintsToTheEnd
// runs its short form).
const raceEnabled = true
