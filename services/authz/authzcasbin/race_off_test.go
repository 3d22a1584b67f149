//go:build !race

package authzcasbin

const raceEnabled = false
