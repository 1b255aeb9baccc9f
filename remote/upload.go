package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// ParseURL splits s3://BUCKET[/KEY] into the bucket and the key (or
// prefix). ok is false for anything else.
func ParseURL(u string) (bucket, key string, ok bool) {
	rest, found := strings.CutPrefix(u, "s3://")
	if !found || rest == "" {
		return "", "", false
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", false
	}
	return bucket, key, true
}

// IsURL reports whether s names an object store location (s3://...).
func IsURL(s string) bool { return strings.HasPrefix(s, "s3://") }

// PartSize is the size of the parts of a multipart upload; smaller
// objects go in one PUT.
const PartSize = 16 << 20

// Upload stores what r holds as key. An object of more than PartSize bytes
// goes up in parts; if anything fails, the multipart upload is aborted,
// so that a failed upload leaves no object behind (and a single PUT is
// all or nothing by itself).
func (s *Store) Upload(ctx context.Context, key string, r io.Reader) error {
	first := make([]byte, PartSize)
	n, err := io.ReadFull(r, first)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(s.bucket),
			Key:           aws.String(key),
			Body:          bytes.NewReader(first[:n]),
			ContentLength: aws.Int64(int64(n)),
		})
		if err != nil {
			return s.describe(err, "upload "+s.name(key))
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("upload %s: %w", s.name(key), err)
	}
	mp, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return s.describe(err, "upload "+s.name(key))
	}
	abort := func(cause error) error {
		// A fresh context: the caller's may be what failed.
		actx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer cancel()
		if _, err := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: mp.UploadId}); err != nil {
			return fmt.Errorf("upload %s: %w (and aborting the upload failed: %v)", s.name(key), cause, s.describe(err, "abort"))
		}
		return fmt.Errorf("upload %s: %w", s.name(key), cause)
	}
	var parts []types.CompletedPart
	buf := first[:n]
	for num := int32(1); ; num++ {
		var perr error
		for attempt := 1; attempt <= s.cfg.Attempts; attempt++ {
			if attempt > 1 {
				if err := sleep(ctx, backoff(attempt-1)); err != nil {
					return abort(err)
				}
			}
			var out *s3.UploadPartOutput
			out, perr = s.client.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: mp.UploadId,
				PartNumber: aws.Int32(num), Body: bytes.NewReader(buf), ContentLength: aws.Int64(int64(len(buf))),
			})
			if perr == nil {
				parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
				break
			}
			perr = s.describe(perr, fmt.Sprintf("part %d", num))
			if !retryable(perr) {
				break
			}
		}
		if perr != nil {
			return abort(perr)
		}
		m, err := io.ReadFull(r, first)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return abort(err)
		}
		buf = first[:m]
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return abort(s.describe(err, "complete"))
	}
	return nil
}

// CreateBucket makes a bucket (tests and tools).
func (s *Store) CreateBucket(ctx context.Context) error {
	if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.bucket)}); err != nil {
		return s.describe(err, "create bucket "+s.bucket)
	}
	return nil
}
