package testkit

import (
	"runtime"
	"testing"
)

// AllocMeter measures what one fuzz input makes the code under test
// allocate. The bound of every fuzz target that parses files: an input of
// n bytes may make the library allocate at most 64·n + 64 MiB in all
// (beyond the buffers the target itself makes, which it declares), so
// that no header field can steer an allocation past what the input
// justifies. It is a total, so it bounds every single allocation too.
type AllocMeter struct{ start uint64 }

// AllocBound is the allocation bound for an input of n bytes.
func AllocBound(n int) uint64 { return 64*uint64(n) + 64<<20 }

// StartAlloc starts measuring.
func StartAlloc() AllocMeter {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return AllocMeter{start: m.TotalAlloc}
}

// Allocated returns the bytes allocated since StartAlloc.
func (a AllocMeter) Allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc - a.start
}

// Check fails t when more than AllocBound(inputLen) + own bytes were
// allocated since StartAlloc; own is what the target allocated itself.
func (a AllocMeter) Check(t testing.TB, inputLen int, own uint64) {
	t.Helper()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if got, limit := m.TotalAlloc-a.start, AllocBound(inputLen)+own; got > limit {
		t.Fatalf("an input of %d bytes made the code allocate %d bytes, over the bound of %d (64×input + 64 MiB + %d of the target's own)", inputLen, got, limit, own)
	}
}
