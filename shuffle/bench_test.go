package shuffle

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
)

const benchSize = 256 << 10

// benchData returns 256 KiB of realistic data: a smooth float64 series,
// little-endian, and English-like text.
func benchData() map[string][]byte {
	f := make([]byte, benchSize)
	for i := 0; i < benchSize/8; i++ {
		binary.LittleEndian.PutUint64(f[8*i:], math.Float64bits(math.Sin(float64(i)*0.001)*1000))
	}
	words := strings.Fields("the of and to in is that it was for on are as with his they at be this from have or by one had not but what all were when we there can an your which their said if do will each about how up out them then she many some so these would other into has more her two like him see time could no make than first been its who now people my made over did down only way find use may water long little very after words called just where most know")
	var sb strings.Builder
	for i := 0; sb.Len() < benchSize; i++ {
		sb.WriteString(words[(i*7919+i/13)%len(words)])
		if i%11 == 10 {
			sb.WriteString(". ")
		} else {
			sb.WriteByte(' ')
		}
	}
	return map[string][]byte{"float64": f, "text": []byte(sb.String()[:benchSize])}
}

func BenchmarkCopy(b *testing.B) {
	src, dst := benchData()["float64"], make([]byte, benchSize)
	b.SetBytes(benchSize)
	for b.Loop() {
		copy(dst, src)
	}
}

// benchFlavours runs f for each available flavour, each data set and each
// typesize.
func benchFlavours(b *testing.B, typesizes []int, f func(b *testing.B, fl *flavour, dst, src []byte, ts int)) {
	data := benchData()
	for _, fl := range flavours {
		if !fl.available {
			continue
		}
		for _, name := range []string{"float64", "text"} {
			for _, ts := range typesizes {
				b.Run(fmt.Sprintf("%s/%s/ts=%d", fl.name, name, ts), func(b *testing.B) {
					src := data[name]
					src = src[:len(src)-len(src)%(8*ts)]
					dst := make([]byte, len(src))
					b.SetBytes(int64(len(src)))
					f(b, fl, dst, src, ts)
				})
			}
		}
	}
}

var byteTypesizes = []int{2, 4, 8, 16, 3, 7}

func BenchmarkUnshuffle(b *testing.B) {
	benchFlavours(b, byteTypesizes, func(b *testing.B, fl *flavour, dst, src []byte, ts int) {
		for b.Loop() {
			fl.unshuffle(dst, src, ts)
		}
	})
}

func BenchmarkShuffle(b *testing.B) {
	benchFlavours(b, byteTypesizes, func(b *testing.B, fl *flavour, dst, src []byte, ts int) {
		for b.Loop() {
			fl.shuffle(dst, src, ts)
		}
	})
}

func BenchmarkBitUnshuffle(b *testing.B) {
	benchFlavours(b, []int{1, 4, 8}, func(b *testing.B, fl *flavour, dst, src []byte, ts int) {
		for b.Loop() {
			fl.bitUnshuffle(dst, src, ts)
		}
	})
}

func BenchmarkBitShuffle(b *testing.B) {
	benchFlavours(b, []int{1, 4, 8}, func(b *testing.B, fl *flavour, dst, src []byte, ts int) {
		for b.Loop() {
			fl.bitShuffle(dst, src, ts)
		}
	})
}
