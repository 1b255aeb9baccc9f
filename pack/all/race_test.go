//go:build race

package all

const raceEnabled = true
