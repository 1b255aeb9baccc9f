//go:build cgo && !purego && linux

package blosc

/*
#cgo LDFLAGS: -ldl
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
*/
import "C"

import (
	"fmt"
	"sync"
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
