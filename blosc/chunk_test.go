package blosc

import "testing"

func TestFillByte(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 100, 4096, 65537} {
		for _, v := range []byte{0, 1, 0xff} {
			b := make([]byte, n+2)
			b[n], b[n+1] = 0xaa, 0xbb
			fillByte(b[:n:n], v)
			for i := range n {
				if b[i] != v {
					t.Fatalf("n=%d v=%d: byte %d is %d", n, v, i, b[i])
				}
			}
			if b[n] != 0xaa || b[n+1] != 0xbb {
				t.Fatalf("n=%d v=%d: wrote past the end", n, v)
			}
		}
	}
}
