//go:build cgo && !purego && linux && race

package blosc

import "unsafe"

// fastCalls is false in race builds: their cgo calls are ones the race
// detector must see, and cgo's pointer checks must pass, so libzstd is
// called through cgo only.
const fastCalls = false

// fastCallMax is unused in race builds.
const fastCallMax = 0

// fastCall is never called in race builds.
func fastCall(fn, arg unsafe.Pointer) { panic("blosc: fastCall in a race build") }
