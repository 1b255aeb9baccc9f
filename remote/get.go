package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Get GETs an object whose version the caller does not know yet (a Zarr
// chunk, found by its key and never listed): the whole object when n < 0,
// the last n bytes when off < 0, else the n bytes at off. It retries as
// ranged reads of opened objects do, and returns the bytes and what the
// answer told of the object (its total size and ETag), with which the
// caller can open that version (OpenInfo) for further ranged reads under
// If-Match. A missing object wraps ErrNotFound; an object (or range)
// larger than limit bytes is refused without reading it; a range past
// the object's end wraps io.ErrUnexpectedEOF.
func (s *Store) Get(ctx context.Context, key string, off, n, limit int64) ([]byte, ObjectInfo, error) {
	var rng string
	switch {
	case n == 0:
		info, err := s.Stat(ctx, key)
		return []byte{}, info, err
	case n < 0:
	case off < 0:
		rng = "bytes=-" + strconv.FormatInt(n, 10)
	default:
		rng = fmt.Sprintf("bytes=%d-%d", off, off+n-1)
	}
	if n > limit {
		return nil, ObjectInfo{}, fmt.Errorf("%s: %d bytes asked, more than %d: %w", s.name(key), n, limit, ErrTooLarge)
	}
	var lastErr error
	for attempt := 1; attempt <= s.cfg.Attempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, backoff(attempt-1)); err != nil {
				return nil, ObjectInfo{}, err
			}
		}
		b, info, err := s.getOnce(ctx, key, rng, n, limit)
		if err == nil {
			return b, info, nil
		}
		lastErr = err
		if !retryable(err) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
	}
	return nil, ObjectInfo{}, lastErr
}

func (s *Store) getOnce(ctx context.Context, key, rng string, n, limit int64) ([]byte, ObjectInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	s.stats.add(1, 0)
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := s.client.GetObject(ctx, in, unsignedPayload)
	if err != nil {
		if httpStatus(err) == 416 {
			return nil, ObjectInfo{}, fmt.Errorf("%s: %s: %w", s.name(key), rng, io.ErrUnexpectedEOF)
		}
		return nil, ObjectInfo{}, s.describe(err, s.name(key))
	}
	defer out.Body.Close()
	length := aws.ToInt64(out.ContentLength)
	info := ObjectInfo{Key: key, Size: length, ETag: aws.ToString(out.ETag), LastModified: aws.ToTime(out.LastModified)}
	if cr := aws.ToString(out.ContentRange); cr != "" {
		// "bytes a-b/total"
		if i := strings.LastIndexByte(cr, '/'); i >= 0 {
			if t, err := strconv.ParseInt(cr[i+1:], 10, 64); err == nil {
				info.Size = t
			}
		}
	}
	if length < 0 || length > limit {
		// Refused from the answer's Content-Length, before its body
		// is read (an answer without one is refused too).
		return nil, ObjectInfo{}, fmt.Errorf("%s: object of %d bytes, more than %d: %w", s.name(key), length, limit, ErrTooLarge)
	}
	if n >= 0 && length != n {
		// A short answer: the range reaches past the object's end.
		return nil, ObjectInfo{}, fmt.Errorf("%s: %s: %d bytes of %d: %w", s.name(key), rng, length, n, io.ErrUnexpectedEOF)
	}
	b := make([]byte, length)
	got, err := io.ReadFull(out.Body, b)
	s.stats.add(0, int64(got))
	if err != nil {
		return nil, ObjectInfo{}, fmt.Errorf("%s: body: %d of %d bytes: %v: %w", s.name(key), got, length, err, ErrShortBody)
	}
	return b, info, nil
}
