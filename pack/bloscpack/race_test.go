//go:build race

package bloscpack

const raceEnabled = true
