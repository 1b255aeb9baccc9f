//go:build cgo && !purego && linux && !race && !msan && !asan && !nofastcall && !go1.27

package blosc

import (
	"unsafe"
	_ "unsafe" // for go:linkname
)

// fastCalls says whether libzstd can be called through fastCall (false
// in the builds of fastcall_off.go).
const fastCalls = true

// fastCallMax is the most output, and the most input, in bytes, that one
// libzstd call may decode through fastCall; larger calls go through cgo.
// At libzstd's slowest (about 500 MB/s on this kind of machine for
// adversarial streams) 1 MiB takes 2 ms, less than the 10 ms a goroutine
// may run before the scheduler asks it to yield.
const fastCallMax = 1 << 20

// asmcgocall is the runtime's switch to the thread's system stack that
// every cgo call makes (runtime.cgocall calls it between entersyscall and
// exitsyscall): it runs the C function fn(arg) on the stack of the
// current thread (a C stack in a cgo binary) and returns.
//
// The reference links because the linker lets references to assembly
// functions' ABI wrappers through; the build constraint stops at the next
// Go release, which should be checked before it is let in (the build then
// falls back to cgo calls, fastcall_off.go).
//
//go:linkname asmcgocall runtime.asmcgocall
//go:noescape
func asmcgocall(fn, arg unsafe.Pointer) int32

// fastCall runs the C function fn(arg) on the thread's system stack
// without telling the scheduler that the goroutine left Go, as cgo does;
// libzstd is called through it once SetDirectCalls(true) asks for it.
// A cgo call counts as a system call: one that outlasts the scheduler's
// 20 µs tick has its processor handed to another thread, which at
// GOMAXPROCS=1 is a pair of context switches per block decoded and keeps
// sysmon waking every 20 µs (docs/PERFORMANCE.md). Here the goroutine
// simply runs, as it would in a Go decoder, for the call's length.
//
// It is only for short calls that neither block nor call back into Go:
// while fn runs, the goroutine cannot be preempted, so a stop-the-world
// waits for it (callers bound the work per call by fastCallMax); fn must
// not call Go, take a lock a Go goroutine may hold, or keep a pointer
// past its return. Go memory passed in stays put: the heap does not
// move, and a goroutine's stack only moves while it runs Go code. The
// CPU profiler files the call's samples under _ExternalCode, without a
// Go caller. The runtime makes such calls itself (setenv, unsetenv).
func fastCall(fn, arg unsafe.Pointer) {
	if fastCallHook != nil {
		fastCallHook()
	}
	asmcgocall(fn, arg)
}

// fastCallHook, when set (by tests, before any decoding starts), is
// called on every fastCall.
var fastCallHook func()
