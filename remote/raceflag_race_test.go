//go:build race

package remote_test

// raceEnabled tells tests that the race detector is on: data-heavy tests
// run smaller, or in make's steps without the detector.
const raceEnabled = true
