//go:build !(amd64 || arm64) || purego

package lz4fast

import "encoding/binary"

// Bounds-checked loads and stores, for the purego tag and other
// architectures. Slicing to the exact length costs one check.

func load8(b []byte, i int) byte        { return b[i] }
func load32(b []byte, i int) uint32     { return binary.LittleEndian.Uint32(b[i : i+4]) }
func load64(b []byte, i int) uint64     { return binary.LittleEndian.Uint64(b[i : i+8]) }
func store8(b []byte, i int, v byte)    { b[i] = v }
func store16(b []byte, i int, v uint16) { binary.LittleEndian.PutUint16(b[i:i+2], v) }
func store64(b []byte, i int, v uint64) { binary.LittleEndian.PutUint64(b[i:i+8], v) }
