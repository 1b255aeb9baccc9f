//go:build !amd64 || purego

package shuffle

// flavours lists the implementations this build knows.
var flavours = []*flavour{&flavourGeneric}

func shuffle(dst, src []byte, t int)   { shuffleGeneric(dst, src, t) }
func unshuffle(dst, src []byte, t int) { unshuffleGeneric(dst, src, t) }

func bitShuffle(dst, src []byte, t int)   { flavourGeneric.bitShuffle(dst, src, t) }
func bitUnshuffle(dst, src []byte, t int) { flavourGeneric.bitUnshuffle(dst, src, t) }
