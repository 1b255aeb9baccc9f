//go:build cgo && !purego && linux

package blosc

/*
#cgo LDFLAGS: -ldl
#cgo noescape bz_decompress_batch
#cgo nocallback bz_decompress_batch
#include <dlfcn.h>
#include <stddef.h>

// libzstd is loaded at run time (dlopen), so that a binary built with cgo
// still runs, on klauspost's decoder, where the library is missing.
static void *(*p_create)(void);
static size_t (*p_free)(void *);
static size_t (*p_decompress)(void *, void *, size_t, const void *, size_t);
static unsigned (*p_iserror)(size_t);
static unsigned (*p_version)(void);

static int bz_load(void) {
	void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) return 0;
	p_create = (void *(*)(void))dlsym(h, "ZSTD_createDCtx");
	p_free = (size_t (*)(void *))dlsym(h, "ZSTD_freeDCtx");
	p_decompress = (size_t (*)(void *, void *, size_t, const void *, size_t))dlsym(h, "ZSTD_decompressDCtx");
	p_iserror = (unsigned (*)(size_t))dlsym(h, "ZSTD_isError");
	p_version = (unsigned (*)(void))dlsym(h, "ZSTD_versionNumber");
	return p_create && p_free && p_decompress && p_iserror && p_version;
}
static unsigned bz_version(void) { return p_version(); }
static void *bz_create(void) { return p_create(); }
static void bz_free(void *c) { p_free(c); }
// bz_decompress returns the decoded size, or -1 on any error.
static long long bz_decompress(void *c, void *dst, size_t n, const void *src, size_t sn) {
	size_t r = p_decompress(c, dst, n, src, sn);
	return p_iserror(r) ? -1 : (long long)r;
}
// bz_decompress_batch decodes n streams of src into dst with one context:
// jobs holds, per stream, its offset and size in src and its offset and
// exact size in dst. It returns -1, or 2*i for stream i corrupt and 2*i+1
// for stream i decoding to another size.
static int bz_decompress_batch(void *c, char *dst, const char *src, const long long *jobs, int n) {
	for (int i = 0; i < n; i++) {
		const long long *j = jobs + 4 * i;
		size_t r = p_decompress(c, dst + j[2], (size_t)j[3], src + j[0], (size_t)j[1]);
		if (p_iserror(r)) return 2 * i;
		if (r != (size_t)j[3]) return 2 * i + 1;
	}
	return -1;
}

*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

func init() { libzstdLoad = loadLibzstd }

// loadLibzstd loads libzstd.so.1 and, when it loads, makes it the decoder.
func loadLibzstd() {
	if C.bz_load() == 0 {
		return
	}
	v := uint(C.bz_version())
	libzstdName = fmt.Sprintf("libzstd %d.%d.%d", v/10000, v/100%100, v%100)
	libzstdDecode = cZstdDecode
}

// dctxs holds idle libzstd decompression contexts (each about 100 KiB of
// C memory), at most maxIdleDctx of them: a decode takes one or makes one,
// and gives it back or frees it.
var (
	dctxMu sync.Mutex
	dctxs  []unsafe.Pointer
)

const maxIdleDctx = 64

func getDctx() unsafe.Pointer {
	dctxMu.Lock()
	if n := len(dctxs); n > 0 {
		c := dctxs[n-1]
		dctxs = dctxs[:n-1]
		dctxMu.Unlock()
		return c
	}
	dctxMu.Unlock()
	return C.bz_create()
}

func putDctx(c unsafe.Pointer) {
	dctxMu.Lock()
	if len(dctxs) < maxIdleDctx {
		dctxs = append(dctxs, c)
		c = nil
	}
	dctxMu.Unlock()
	if c != nil {
		C.bz_free(c)
	}
}

// cZstdDecode decodes the zstd frames of src into exactly dst with
// libzstd, which writes nothing past len(dst) (the capacity it is given):
// a stream that decodes to more fails.
func cZstdDecode(dst, src []byte) error {
	if len(src) == 0 {
		if len(dst) == 0 {
			return nil
		}
		return errShort
	}
	var d unsafe.Pointer
	if len(dst) > 0 {
		d = unsafe.Pointer(unsafe.SliceData(dst))
	}
	c := getDctx()
	if c == nil {
		return fmt.Errorf("libzstd: cannot create a decompression context")
	}
	// Bounded on both sides: libzstd decodes every frame in src, and a
	// hostile stream of empty frames decodes to nothing for as long as
	// it is long.
	n := C.bz_decompress(c, d, C.size_t(len(dst)), unsafe.Pointer(unsafe.SliceData(src)), C.size_t(len(src)))
	putDctx(c)
	if n < 0 {
		return fmt.Errorf("libzstd: corrupt stream")
	}
	if int(n) != len(dst) {
		return errShort
	}
	return nil
}

// libzstdBatchCalls counts libzstdDecodeBatch's calls into C (for the
// tests).
var libzstdBatchCalls atomic.Int64

// libzstdDecodeBatch decodes the streams that jobs describe (4 values per
// stream: offset and size in src, offset and size in dst; every range
// inside its slice) in one call into C, so that a block's streams, or a
// group of blocks' (Chunk.Decode), cost one cgo call, not one each: the Go
// scheduler hands the processor of a goroutine in a long call to another
// thread, and it does so once per call that outlasts its 20 µs tick. It
// returns the failed stream's position in jobs and its error, or -1 and
// nil.
func libzstdDecodeBatch(dst, src []byte, jobs []int64) (int, error) {
	n := len(jobs) / 4
	if n == 0 {
		return -1, nil
	}
	for i := range n {
		j := jobs[4*i:]
		if j[0] < 0 || j[1] <= 0 || j[0]+j[1] > int64(len(src)) || j[2] < 0 || j[3] < 0 || j[2]+j[3] > int64(len(dst)) {
			return i, fmt.Errorf("libzstd: stream outside its block")
		}
	}
	var d unsafe.Pointer
	if len(dst) > 0 {
		d = unsafe.Pointer(unsafe.SliceData(dst))
	}
	c := getDctx()
	if c == nil {
		return 0, fmt.Errorf("libzstd: cannot create a decompression context")
	}
	libzstdBatchCalls.Add(1)
	r := int(C.bz_decompress_batch(c, (*C.char)(d), (*C.char)(unsafe.Pointer(unsafe.SliceData(src))), (*C.longlong)(unsafe.Pointer(unsafe.SliceData(jobs))), C.int(n)))
	putDctx(c)
	switch {
	case r < 0:
		return -1, nil
	case r%2 == 0:
		return r / 2, fmt.Errorf("libzstd: corrupt stream")
	default:
		return r / 2, errShort
	}
}
