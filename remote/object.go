package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Object is one version of an object, opened for reading: an
// io.ReaderAt over ranged GETs that all carry If-Match with the ETag seen
// at open, so that it never returns bytes of another version. It is safe
// for concurrent use.
type Object struct {
	ObjectInfo
	s       *Store
	cacheID string // the range cache's key: key and ETag

	// opening widens small reads to whole OpenWindow-aligned windows,
	// while a container's header, index and trailer are being parsed.
	opening atomic.Bool

	fmu      sync.Mutex
	inflight []*fetch // GETs under way, for readers of the same bytes

	ramu    sync.Mutex
	lastEnd int64 // where the last read ended
	streak  int64 // bytes read sequentially
	window  int64 // current read-ahead window
	aheadTo int64 // read-ahead requested up to here
	growAt  int64 // the window may grow again once the reader gets here
	// streaming is the hint of the layer above that a reader streams
	// through the object (see Streaming); a jump clears it.
	streaming atomic.Bool
	changed   atomic.Bool
	failed    atomic.Bool
}

// fetch is one GET under way.
type fetch struct {
	start, end int64
	done       chan struct{}
	err        error
}

// OpenWindow is the alignment and minimum size of the reads an Object
// makes while it is opening (see Open): a header, a trailer and an index
// come in as few GETs as the format allows.
const OpenWindow = 128 << 10

// SmallObject is the size up to which an object is fetched whole by the
// first read of its opening: one GET instead of one per chunk.
const SmallObject = 1 << 20

// coalesceGap is the size below which a cached range inside a read is
// fetched again rather than split the read into two GETs.
const coalesceGap = 32 << 10

// seqSlack is how far from the end of the last read a read may start and
// still count as sequential (parallel decoders read slightly out of
// order).
const seqSlack = 4 << 20

// seqThreshold is how many bytes a reader must read in sequence before
// read-ahead starts (a random read touches a chunk's header, block
// starts and a block's stream in order, and must not trigger it).
const seqThreshold = 512 << 10

// Open returns the current version of key (one HEAD). Until Opened is
// called, its reads are widened to OpenWindow-aligned windows.
func (s *Store) Open(ctx context.Context, key string) (*Object, error) {
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.OpenInfo(info), nil
}

// OpenInfo returns the version of an object described by info (from a
// listing or Stat), without a request.
func (s *Store) OpenInfo(info ObjectInfo) *Object {
	o := &Object{ObjectInfo: info, s: s, cacheID: info.Key + "\x00" + info.ETag}
	o.window = s.cfg.ReadAheadMin
	o.opening.Store(true)
	return o
}

// Opened ends the opening phase: reads fetch only what they ask for.
func (o *Object) Opened() { o.opening.Store(false) }

// Failed reports whether a read of the object failed (and was logged),
// whatever the layers above made of the error.
func (o *Object) Failed() bool { return o.failed.Load() }

// Changed reports whether a read found that the object was replaced.
func (o *Object) Changed() bool { return o.changed.Load() }

// Name returns s3://bucket/key.
func (o *Object) Name() string { return o.s.name(o.Key) }

// Streaming tells the object that a reader streams through it: the layer
// above saw it read in sequence. Read-ahead then starts with the next
// read that continues the last one, instead of after seqThreshold bytes
// read in sequence, which at the start of a stream are one GET per block,
// in series. A read elsewhere (a jump) clears the hint.
func (o *Object) Streaming() { o.streaming.Store(true) }

// onDisk reports whether the object's ranges go to the disk cache: not
// without one, nor for an object without an ETag, whose version nothing
// tells (a replaced object would be served from an old one's ranges).
func (o *Object) onDisk() bool { return o.s.disk != nil && o.ETag != "" }

// Forget drops the object's cached ranges.
func (o *Object) Forget() { o.s.cache.drop(o.cacheID) }

// ReadAt reads len(p) bytes at off. Past the end it returns what there
// is and io.EOF. A read that cannot be served (the object changed, or the
// server failed every try) returns an error naming the object and range.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset %d", o.Name(), off)
	}
	if off >= o.Size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), o.Size-off)
	seq := o.readAhead(off, want)
	if err := o.read(context.Background(), p[:want], off, want, seq); err != nil {
		return 0, err
	}
	if want < int64(len(p)) {
		return int(want), io.EOF
	}
	return int(want), nil
}

// ReadExact reads the len(p) bytes at off, all within the object, and
// fetches no more than those (through the range cache, with If-Match and
// retries): no read-ahead, for a caller that reads whole units (the
// inner chunks of a Zarr shard) and decodes ahead itself.
func (o *Object) ReadExact(p []byte, off int64) error {
	if off < 0 || off > o.Size-int64(len(p)) {
		return fmt.Errorf("%s: range [%d,+%d) of a %d-byte object: %w", o.Name(), off, len(p), o.Size, io.ErrUnexpectedEOF)
	}
	return o.read(context.Background(), p, off, int64(len(p)), false)
}

// ReadInPlace lends fn the n bytes at off where they lie in the range
// cache, sparing the copy ReadAt makes (blosc.InPlaceReader: a block
// decodes straight from the fetched bytes). It does so only when one
// cached range holds all of them, and keeps that range's memory pinned
// while fn runs; otherwise ok is false, and the caller uses ReadAt, which
// fetches what is missing.
func (o *Object) ReadInPlace(off, n int64, fn func([]byte) error) (ok bool, err error) {
	if off < 0 || n <= 0 || off+n > o.Size || o.opening.Load() {
		return false, nil
	}
	b, r := o.s.cache.get(o.cacheID, off)
	if r == nil {
		return false, nil
	}
	defer r.release()
	if int64(len(b)) < n {
		return false, nil
	}
	o.readAhead(off, n) // as ReadAt does: a stream's read-ahead goes on
	return true, fn(b[:n:n])
}

// read fills p from off, from the cache, from GETs under way, or with new
// GETs of the missing ranges. A nil p fetches [off, off+n) into the cache
// (read-ahead) without copying. A sequential reader (seq) that must fetch
// fetches at least ReadAheadMin bytes, so that it does not fall into
// block-sized GETs when it overtakes its read-ahead.
func (o *Object) read(ctx context.Context, p []byte, off, n int64, seq bool) error {
	end := off + n
	pos := off
	put := func(b []byte) int64 {
		m := min(int64(len(b)), end-pos)
		if p != nil {
			copy(p[pos-off:], b[:m])
		}
		return m
	}
	for pos < end {
		if b, r := o.s.cache.get(o.cacheID, pos); r != nil {
			pos += put(b)
			r.release()
			continue
		}
		if o.onDisk() {
			if start, b := o.s.disk.get(o.s.diskID+o.cacheID, pos); b != nil {
				r := &rbuf{b: b}
				r.refs.Store(1)
				o.s.cache.put(o.cacheID, start, r)
				r.release()
				pos += put(b[pos-start:])
				continue
			}
		}
		if f := o.waitInflight(pos); f != nil {
			if f.err != nil {
				return f.err
			}
			continue // now in the cache, unless evicted meanwhile
		}
		// Fetch from pos to the next cached range or GET under way.
		fs, fe := pos, end
		if seq {
			fe = min(o.Size, max(fe, pos+o.s.cfg.ReadAheadMin))
		}
		if nx := o.s.cache.next(o.cacheID, pos, fe, coalesceGap); nx > pos && nx < fe {
			fe = nx // up to the next cached range
		}
		if o.opening.Load() {
			fs = fs &^ (OpenWindow - 1)
			fe = min(o.Size, (fe+OpenWindow-1)&^(OpenWindow-1))
			if fe-fs < OpenWindow {
				// A read near the end (a frame's trailer) takes a
				// whole window before it too, where the index lies:
				// cut at the window boundary, the index cost one more
				// GET whenever the trailer began a window.
				fs = max(0, fe-OpenWindow)
			}
			if o.Size <= SmallObject {
				fs, fe = 0, o.Size
			}
			// Not again what the cache holds before pos: the head a
			// listing's probe fetched, say.
			fs = o.s.cache.skip(o.cacheID, fs, pos)
		}
		start, rs, err := o.fetchRange(ctx, pos, fs, fe)
		if err != nil {
			return err
		}
		if rs == nil {
			continue // a GET under way covers pos
		}
		for _, r := range rs {
			if n := int64(len(r.b)); pos < end && pos < start+n {
				pos += put(r.b[pos-start:])
			}
			start += int64(len(r.b))
		}
		releaseAll(rs)
	}
	return nil
}

// waitInflight waits for a GET under way that covers pos, and returns it
// (nil if there is none).
func (o *Object) waitInflight(pos int64) *fetch {
	o.fmu.Lock()
	var f *fetch
	for _, x := range o.inflight {
		if x.start <= pos && pos < x.end {
			f = x
			break
		}
	}
	o.fmu.Unlock()
	if f != nil {
		<-f.done
	}
	return f
}

// fetchRange GETs [start, end) (which holds pos), trimmed so as not to
// overlap GETs under way, stores it in the cache and returns where it
// starts and its consecutive pieces, with references the caller
// releases. It returns no pieces and no error when a GET under way
// already covers pos.
func (o *Object) fetchRange(ctx context.Context, pos, start, end int64) (int64, []*rbuf, error) {
	o.fmu.Lock()
	for _, x := range o.inflight {
		switch {
		case x.start <= pos && pos < x.end:
			o.fmu.Unlock()
			return 0, nil, nil
		case x.start <= start && start < x.end:
			start = x.end // x ends before pos
		case x.start > pos && x.start < end:
			end = x.start
		}
	}
	f := &fetch{start: start, end: end, done: make(chan struct{})}
	o.inflight = append(o.inflight, f)
	o.fmu.Unlock()

	rs, err := o.get(ctx, start, end)
	f.err = err
	at := start
	for _, r := range rs {
		o.s.cache.put(o.cacheID, at, r)
		if o.onDisk() {
			o.s.disk.put(o.s.diskID+o.cacheID, at, r.b)
		}
		at += int64(len(r.b))
	}
	o.fmu.Lock()
	for i, x := range o.inflight {
		if x == f {
			o.inflight = append(o.inflight[:i], o.inflight[i+1:]...)
			break
		}
	}
	o.fmu.Unlock()
	close(f.done)
	return start, rs, err
}

// get GETs [start, end) of this version, retrying failures that may pass
// (a bounded number of times, with backoff), each try under a deadline.
// The bytes come in consecutive pieces (see bufPool), each with one
// reference for the caller.
func (o *Object) get(ctx context.Context, start, end int64) ([]*rbuf, error) {
	rng := fmt.Sprintf("bytes=%d-%d", start, end-1)
	var lastErr error
	for attempt := 1; attempt <= o.s.cfg.Attempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, backoff(attempt-1)); err != nil {
				return nil, err
			}
		}
		rs, err := o.getOnce(ctx, rng, start, end)
		if err == nil {
			return rs, nil
		}
		lastErr = err
		if !retryable(err) {
			break
		}
	}
	if errors.Is(lastErr, ErrChanged) {
		o.changed.Store(true)
	}
	o.failed.Store(true)
	err := fmt.Errorf("%s: range [%d,%d): %w: %w", o.Name(), start, end, ErrRead, lastErr)
	o.s.cfg.Logger.Print(err)
	return nil, err
}

func (o *Object) getOnce(ctx context.Context, rng string, start, end int64) ([]*rbuf, error) {
	ctx, cancel := context.WithTimeout(ctx, o.s.cfg.RequestTimeout)
	defer cancel()
	o.s.stats.add(1, 0)
	in := &s3.GetObjectInput{
		Bucket: aws.String(o.s.bucket),
		Key:    aws.String(o.Key),
		Range:  aws.String(rng),
	}
	if o.ETag != "" {
		// Without an ETag there is nothing to match: an empty
		// If-Match matches no object at all.
		in.IfMatch = aws.String(o.ETag)
	}
	out, err := o.s.client.GetObject(ctx, in, unsignedPayload)
	if err != nil {
		return nil, o.s.describe(err, "GET")
	}
	defer out.Body.Close()
	if et := aws.ToString(out.ETag); et != "" && et != o.ETag {
		return nil, fmt.Errorf("ETag %s, opened as %s: %w", et, o.ETag, ErrChanged)
	}
	if cr := aws.ToString(out.ContentRange); cr != "" && !strings.HasPrefix(cr, "bytes "+strconv.FormatInt(start, 10)+"-") {
		return nil, fmt.Errorf("Content-Range %q for %s", cr, rng)
	}
	if out.ContentLength != nil && *out.ContentLength != end-start {
		return nil, fmt.Errorf("Content-Length %d for %s: %w", *out.ContentLength, rng, ErrShortBody)
	}
	rs := make([]*rbuf, 0, (end-start+slabSize-1)/slabSize)
	got := int64(0)
	for got < end-start {
		r := o.s.bufs.get(int(min(end-start-got, slabSize)))
		rs = append(rs, r)
		n, err := io.ReadFull(out.Body, r.b)
		got += int64(n)
		if err != nil {
			o.s.stats.add(0, got)
			releaseAll(rs)
			return nil, fmt.Errorf("body: %d of %d bytes: %v: %w", got, end-start, err, ErrShortBody)
		}
	}
	o.s.stats.add(0, got)
	// A body longer than asked is as wrong as a short one.
	var one [1]byte
	if m, _ := out.Body.Read(one[:]); m > 0 {
		releaseAll(rs)
		return nil, fmt.Errorf("body longer than %d bytes: %w", end-start, ErrShortBody)
	}
	return rs, nil
}

// unsignedPayload signs a GET with UNSIGNED-PAYLOAD in place of the hash
// of its empty body, as S3 clients commonly do for requests without a
// body: the body has nothing to protect, and the request's headers,
// If-Match and Range among them, are signed all the same.
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

// readAhead follows the reader: once a reader has read seqThreshold bytes
// in sequence, GETs of the window past its position start in the
// background; a jump resets it. The window doubles, up to ReadAheadMax,
// at most once per ReadAheadMin bytes the reader moves on, not on every
// read: parallel decoders read several blocks at once, and a window that
// doubled on each of them would start a burst of GETs that share the
// bandwidth, so that the bytes the reader needs next come in as late as
// the farthest ones.
func (o *Object) readAhead(off, n int64) (seq bool) {
	max := o.s.cfg.ReadAheadMax
	if max <= 0 || o.opening.Load() {
		return false
	}
	o.ramu.Lock()
	if off >= o.lastEnd-seqSlack && off <= o.lastEnd+seqSlack && o.streak > 0 {
		o.streak += n
		o.lastEnd = max64(o.lastEnd, off+n)
	} else {
		o.streak, o.lastEnd, o.window, o.aheadTo, o.growAt = n, off+n, o.s.cfg.ReadAheadMin, 0, 0
		o.streaming.Store(false)
	}
	if o.streak < seqThreshold && (o.streak == n || !o.streaming.Load()) {
		o.ramu.Unlock()
		return false
	}
	from := max64(o.aheadTo, off+n)
	to := min(o.Size, off+n+o.window)
	part := max64(min(o.window/4, 8<<20), 1<<20)
	// Wait until a whole part is due: once the window stops growing,
	// each read moves its end by a block only, and a GET per block is
	// what read-ahead is there to avoid.
	if to-from < part && to < o.Size || to <= from {
		o.ramu.Unlock()
		return true
	}
	if to < o.Size {
		// Whole parts only: the reader has moved on by a block or two
		// since the last part was due, and a GET of that remainder
		// would cost a request (client, server, and on the way) for a
		// few KiB; it goes with the next part instead. This halved the
		// GETs of a sequential read.
		to = from + (to-from)/part*part
	}
	o.aheadTo = to
	// What a sequential reader has read leaves the cache (the kernel's
	// page cache keeps the plain bytes): their slabs then go back to the
	// pool for the next GETs, where fresh memory would cost a page fault
	// per 4 KiB, the dearest part of receiving a body.
	o.s.cache.dropBefore(o.cacheID, off-seqSlack)
	if off+n >= o.growAt {
		o.window = min(2*o.window, max)
		o.growAt = off + n + o.s.cfg.ReadAheadMin
	}
	o.ramu.Unlock()
	for s := from; s < to; s += part {
		e := min(to, s+part)
		go func() {
			o.s.ahead <- struct{}{}
			defer func() { <-o.s.ahead }()
			// Only what is missing: a reader that overtook the
			// read-ahead has fetched some of it.
			o.read(context.Background(), nil, s, e-s, false) // errors surface on the real read
		}()
	}
	return true
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
