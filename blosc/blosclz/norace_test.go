//go:build !race

package blosclz

const raceEnabled = false
