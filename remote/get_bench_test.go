package remote_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit/fakes3"
	"github.com/bloscfs/bloscfs/remote"
)

// BenchmarkColdGET measures one uncached 4 KiB ReadAt of an object: one
// signed ranged GET to an in-process server over loopback, the cost a
// cold random read pays twice. Its CPU profile shows the client's share
// (request building, signing, the HTTP round trip).
func BenchmarkColdGET(b *testing.B) {
	b.Setenv("AWS_ACCESS_KEY_ID", "AKIDBENCHMARK0000000")
	b.Setenv("AWS_SECRET_ACCESS_KEY", "benchmarksecret0000000000000000000000000")
	b.Setenv("AWS_SESSION_TOKEN", "")
	b.Setenv("AWS_PROFILE", "")
	srv := fakes3.New("bkt")
	defer srv.Close()
	data := make([]byte, 64<<20)
	srv.Put("f", data)
	s, err := remote.New(context.Background(), "bkt", remote.Config{Endpoint: srv.URL, ReadAheadMax: -1})
	if err != nil {
		b.Fatal(err)
	}
	o, err := s.Open(context.Background(), "f")
	if err != nil {
		b.Fatal(err)
	}
	o.Opened()
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		o.Forget()
		if _, err := o.ReadAt(buf, rng.Int64N(o.Size-4096)); err != nil {
			b.Fatal(err)
		}
	}
}
