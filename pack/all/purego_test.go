//go:build purego

package all

// puregoBuild tells the grid tests that the portable shuffle runs (make
// purego): the whole grids run with the SIMD shuffle in make canary.
const puregoBuild = true
