//go:build cgo && !purego && linux && (race || nofastcall)

package blosc

import "unsafe"

// fastCalls is false in race builds (their cgo calls are ones the race
// detector must see, and cgo's pointer checks must pass) and with the
// nofastcall tag (for a Go release whose linker refuses the reference to
// runtime.asmcgocall): libzstd is then called through cgo only.
const fastCalls = false

// fastCallMax is unused here.
const fastCallMax = 0

// fastCall is never called here.
func fastCall(fn, arg unsafe.Pointer) { panic("blosc: fastCall without fast calls") }
