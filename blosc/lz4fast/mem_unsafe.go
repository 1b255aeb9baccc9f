//go:build (amd64 || arm64) && !purego

package lz4fast

import "unsafe"

// Loads and stores without bounds checks, on little-endian machines with
// fast unaligned access. Every caller stays within the slice: the encoder
// reads no further than the input's last 5 bytes before its loads, and
// writes only after checking the output budget as lz4.c does
// (compress16/compress32 say why each access is in bounds). The purego
// tag selects the bounds-checked versions of mem_other.go.

func at(b []byte, i int) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), i) }

func load8(b []byte, i int) byte        { return *(*byte)(at(b, i)) }
func load32(b []byte, i int) uint32     { return *(*uint32)(at(b, i)) }
func load64(b []byte, i int) uint64     { return *(*uint64)(at(b, i)) }
func store8(b []byte, i int, v byte)    { *(*byte)(at(b, i)) = v }
func store16(b []byte, i int, v uint16) { *(*uint16)(at(b, i)) = v }
func store64(b []byte, i int, v uint64) { *(*uint64)(at(b, i)) = v }
