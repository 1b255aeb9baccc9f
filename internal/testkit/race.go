//go:build race

package testkit

// RaceEnabled reports a build with the race detector: data-heavy tests
// run smaller or in make's steps without it, and allocation counts mean
// nothing (sync.Pool drops items at random under it).
const RaceEnabled = true
