package remote_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRemoteListing measures `ls -l` of a prefix of N frames of
// about 28 KB (BLOSCFS_BENCH_OBJECTS, 10,000 by default; frames of
// BLOSCFS_BENCH_PLAIN_KB KiB of plain data, 32 by default) in versitygw
// through a fresh remote mount, twice (the second within --dir-cache),
// with the requests the mount sent and the bytes its GETs fetched for
// each (`bloscfs stats`). The rows are appended to BLOSCFS_BENCH_TABLE.
func BenchmarkRemoteListing(b *testing.B) {
	setup.Require(b)
	n := 10000
	if s := os.Getenv("BLOSCFS_BENCH_OBJECTS"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	kb := 32
	if s := os.Getenv("BLOSCFS_BENCH_PLAIN_KB"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			kb = v
		}
	}
	dir := b.TempDir()
	// 4096 float64 of a random walk (by default): a frame of about 28 KB.
	plain := filepath.Join(dir, "walk.f64")
	rng := rand.New(rand.NewPCG(1, 1))
	buf, x := make([]byte, kb<<10), 0.0
	for i := 0; i < len(buf); i += 8 {
		x += rng.NormFloat64()
		binary.LittleEndian.PutUint64(buf[i:], math.Float64bits(x))
	}
	if err := os.WriteFile(plain, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	frame := filepath.Join(dir, "walk.b2frame")
	timed(b, bin, "pack", "-q", "-f", plain, frame)
	fb, err := os.ReadFile(frame)
	if err != nil {
		b.Fatal(err)
	}
	s := newStore(b, "listing")
	s.CreateBucket(context.Background())
	var next atomic.Int64
	var wg sync.WaitGroup
	var upErr atomic.Value
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := s.Upload(context.Background(), fmt.Sprintf("frames/f%07d.b2frame", i), bytes.NewReader(fb)); err != nil {
					upErr.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := upErr.Load().(error); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		m := benchMount(b, "s3://listing", "--dir-cache", "10m")
		p := filepath.Join(m.Dir, "frames")
		s0 := mountStats(b, m)
		cold := timed(b, "ls", "-l", p)
		s1 := mountStats(b, m)
		warm := timed(b, "ls", "-l", p)
		s2 := mountStats(b, m)
		m.MustUnmount(b)
		var rows [][]string
		row := func(cells ...string) { rows = append(rows, cells) }
		row("ls -l of the prefix", "time", "requests", "fetched")
		mb := func(v int64) string { return fmt.Sprintf("%.1f MB", float64(v)/1e6) }
		row("fresh mount", fmt.Sprintf("%.2f s", cold.Seconds()), strconv.FormatInt(s1.Requests-s0.Requests, 10), mb(s1.FetchedBytes-s0.FetchedBytes))
		row("second, within --dir-cache", fmt.Sprintf("%.2f s", warm.Seconds()), strconv.FormatInt(s2.Requests-s1.Requests, 10), mb(s2.FetchedBytes-s1.FetchedBytes))
		b.ReportMetric(float64(s1.Requests-s0.Requests)/float64(n), "requests/object")
		b.ReportMetric(float64(s2.Requests-s1.Requests), "second-requests")
		load, _ := os.ReadFile("/proc/loadavg")
		hdr := fmt.Sprintf("\nRemote listing: a prefix of %d frames of %d bytes in versitygw on 127.0.0.1, %s, load average %s.\n\n",
			n, len(fb), time.Now().UTC().Format("2006-01-02"), strings.Join(strings.Fields(string(load))[:3], " "))
		var sb strings.Builder
		for i, r := range rows {
			fmt.Fprintf(&sb, "| %s |\n", strings.Join(r, " | "))
			if i == 0 {
				fmt.Fprintf(&sb, "|%s\n", strings.Repeat("---|", len(r)))
			}
		}
		fmt.Fprintf(os.Stderr, "%s%s", hdr, sb.String())
		if f := os.Getenv("BLOSCFS_BENCH_TABLE"); f != "" {
			if fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
				fh.WriteString(hdr + sb.String())
				fh.Close()
			}
		}
	}
}
