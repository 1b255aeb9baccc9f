//go:build cgo && !purego && linux && (race || msan || asan || nofastcall || go1.27)

package blosc

import "unsafe"

// fastCalls is false in race, msan and asan builds (their cgo calls are
// ones the detectors must see, and cgo's pointer checks must pass), with
// the nofastcall tag, and from Go 1.27 on until fastcall.go's reference
// to runtime.asmcgocall is checked against it: libzstd is then called
// through cgo only.
const fastCalls = false

// fastCallMax is unused here.
const fastCallMax = 0

// fastCallHook is unused here.
var fastCallHook func()

// fastCall is never called here.
func fastCall(fn, arg unsafe.Pointer) { panic("blosc: fastCall without fast calls") }
