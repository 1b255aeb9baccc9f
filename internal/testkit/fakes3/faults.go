package fakes3

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Faults is a reverse proxy that fails a share of the requests it
// forwards: it drops the connection, delays, answers 500 or 503 SlowDown,
// or cuts the response body short.
type Faults struct {
	// URL is the proxy's endpoint.
	URL string
	// Rate is the share of requests that fail (0..1).
	Rate atomic.Value // float64
	// Delay is how long a delayed request waits, in nanoseconds (set it
	// with Store: requests may be served meanwhile).
	Delay atomic.Int64
	// Only, when set, is the one kind of fault injected: "drop", "500",
	// "503", "delay" or "truncate".
	Only string

	srv   *httptest.Server
	proxy *httputil.ReverseProxy
	mu    sync.Mutex
	rng   *rand.Rand
	// Injected counts the faults injected, by kind.
	Injected sync.Map // string → *atomic.Int64
	// Requests and Bytes count the requests forwarded and the response
	// body bytes sent back.
	Requests, Bytes atomic.Int64
}

// NewFaults starts a proxy to target on 127.0.0.1 that fails a rate
// share of requests, drawing from seed.
func NewFaults(target string, rate float64, seed uint64) *Faults {
	u, err := url.Parse(target)
	if err != nil {
		panic(err)
	}
	f := &Faults{proxy: httputil.NewSingleHostReverseProxy(u), rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	f.Delay.Store(int64(50 * time.Millisecond))
	f.proxy.ErrorLog = nil
	f.proxy.BufferPool = bufPool{}
	// Keep as many connections to the target open as the client keeps
	// to the proxy (http.DefaultTransport keeps 2 per host): with more
	// GETs in flight, the others paid a new connection each.
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 64, 64
	f.proxy.Transport = t
	f.Rate.Store(rate)
	f.srv = httptest.NewServer(f)
	f.URL = f.srv.URL
	return f
}

// bufPool hands the proxy 256 KiB copy buffers instead of its own
// 32 KiB ones: benchmarks read hundreds of MiB through it, and the proxy's
// syscalls take CPU from the mount it measures.
type bufPool struct{}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (bufPool) Get() []byte  { return *copyBufs.Get().(*[]byte) }
func (bufPool) Put(b []byte) { copyBufs.Put(&b) }

// Close stops the proxy.
func (f *Faults) Close() {
	f.srv.Close()
	f.proxy.Transport.(*http.Transport).CloseIdleConnections()
}

func (f *Faults) count(kind string) {
	v, _ := f.Injected.LoadOrStore(kind, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// Count returns how many faults of kind were injected.
func (f *Faults) Count(kind string) int64 {
	v, ok := f.Injected.Load(kind)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

// ServeHTTP forwards one request, perhaps failing it.
func (f *Faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.Requests.Add(1)
	w = countingWriter{w, &f.Bytes}
	f.mu.Lock()
	fail := f.rng.Float64() < f.Rate.Load().(float64)
	kind := f.rng.IntN(5)
	cut := f.rng.Float64()
	f.mu.Unlock()
	if !fail {
		f.proxy.ServeHTTP(w, r)
		return
	}
	if f.Only != "" {
		kind = map[string]int{"drop": 0, "500": 1, "503": 2, "delay": 3, "truncate": 4}[f.Only]
	}
	switch kind {
	case 0:
		f.count("drop")
		panic(http.ErrAbortHandler) // the server closes the connection
	case 1:
		f.count("500")
		writeErr(w, 500, "InternalError")
	case 2:
		f.count("503")
		writeErr(w, 503, "SlowDown")
	case 3:
		f.count("delay")
		time.Sleep(time.Duration(f.Delay.Load()))
		f.proxy.ServeHTTP(w, r)
	case 4:
		f.count("truncate")
		f.proxy.ServeHTTP(&truncWriter{ResponseWriter: w, frac: cut, left: -1}, r)
	}
}

// truncWriter passes on the first frac of a body (by its Content-Length),
// then fails, which makes the proxy abort the connection mid-body.
type truncWriter struct {
	http.ResponseWriter
	frac float64
	left int64
}

var errCut = errors.New("fakes3: body cut")

func (t *truncWriter) Write(p []byte) (int, error) {
	if t.left < 0 {
		cl, _ := strconv.ParseInt(t.Header().Get("Content-Length"), 10, 64)
		t.left = int64(t.frac * float64(cl))
	}
	if int64(len(p)) <= t.left {
		t.left -= int64(len(p))
		return t.ResponseWriter.Write(p)
	}
	n, _ := t.ResponseWriter.Write(p[:t.left])
	t.left = 0
	if fl, ok := t.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
	return n, errCut
}
