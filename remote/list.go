package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Listing is what one prefix holds, one level deep: objects (by their
// name after the prefix) and sub-prefixes (by their name, without the
// trailing slash).
type Listing struct {
	Objects  map[string]ObjectInfo
	Prefixes map[string]bool
}

type listEntry struct {
	once sync.Once
	at   time.Time
	l    *Listing
	err  error
}

// List returns the listing of prefix ("" or ending in "/"), paginated
// through ListObjectsV2 with delimiter "/", reused for Config.DirCache.
// Concurrent calls for one prefix share one listing.
func (s *Store) List(ctx context.Context, prefix string) (*Listing, error) {
	s.listMu.Lock()
	e := s.lists[prefix]
	if e == nil || (e.l != nil || e.err != nil) && time.Since(e.at) > max(s.cfg.DirCache, 0) {
		e = &listEntry{}
		s.lists[prefix] = e
	}
	s.listMu.Unlock()
	e.once.Do(func() {
		l, err := s.list(ctx, prefix)
		// Under listMu: a List of the same prefix reads them there.
		s.listMu.Lock()
		e.l, e.err, e.at = l, err, time.Now()
		if err != nil && s.lists[prefix] == e {
			delete(s.lists, prefix) // errors are not cached
		}
		s.listMu.Unlock()
	})
	return e.l, e.err
}

// Invalidate forgets the cached listing of prefix.
func (s *Store) Invalidate(prefix string) {
	s.listMu.Lock()
	delete(s.lists, prefix)
	s.listMu.Unlock()
}

func (s *Store) list(ctx context.Context, prefix string) (*Listing, error) {
	l := &Listing{Objects: map[string]ObjectInfo{}, Prefixes: map[string]bool{}}
	err := s.pages(ctx, prefix, "/", func(out *s3.ListObjectsV2Output) bool {
		for _, o := range out.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), prefix)
			if name == "" || strings.Contains(name, "/") {
				continue // the prefix's own marker object
			}
			l.Objects[name] = ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), LastModified: aws.ToTime(o.LastModified)}
		}
		for _, p := range out.CommonPrefixes {
			name := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(p.Prefix), prefix), "/")
			if name != "" && !strings.Contains(name, "/") {
				l.Prefixes[name] = true
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Du returns the number and total size of the objects under prefix, at
// any depth: a listing without delimiter, one request per 1000 objects,
// not cached.
func (s *Store) Du(ctx context.Context, prefix string) (objects, bytes int64, err error) {
	err = s.pages(ctx, prefix, "", func(out *s3.ListObjectsV2Output) bool {
		for _, o := range out.Contents {
			objects++
			bytes += aws.ToInt64(o.Size)
		}
		return true
	})
	return objects, bytes, err
}

// ErrTooMany reports a prefix that holds more objects than a Walk takes.
var ErrTooMany = errors.New("too many objects")

// Walk returns the objects under prefix at any depth, in key order: a
// listing without delimiter, one request per 1000 objects, not cached.
// More than max objects is ErrTooMany.
func (s *Store) Walk(ctx context.Context, prefix string, max int) ([]ObjectInfo, error) {
	var out []ObjectInfo
	over := false
	err := s.pages(ctx, prefix, "", func(page *s3.ListObjectsV2Output) bool {
		for _, o := range page.Contents {
			if len(out) >= max {
				over = true
				return false
			}
			out = append(out, ObjectInfo{Key: aws.ToString(o.Key), Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), LastModified: aws.ToTime(o.LastModified)})
		}
		return true
	})
	if err == nil && over {
		err = fmt.Errorf("%s: %w: more than %d", s.name(prefix), ErrTooMany, max)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pages lists prefix page by page (with delimiter, when not empty),
// retrying each page's request, and gives each page to fn, until fn
// returns false.
func (s *Store) pages(ctx context.Context, prefix, delimiter string, fn func(*s3.ListObjectsV2Output) bool) error {
	var token *string
	for {
		var out *s3.ListObjectsV2Output
		var err error
		for attempt := 1; attempt <= s.cfg.Attempts; attempt++ {
			if attempt > 1 {
				if err := sleep(ctx, backoff(attempt-1)); err != nil {
					return err
				}
			}
			rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
			s.stats.add(1, 0)
			in := &s3.ListObjectsV2Input{
				Bucket:            aws.String(s.bucket),
				Prefix:            aws.String(prefix),
				ContinuationToken: token,
			}
			if delimiter != "" {
				in.Delimiter = aws.String(delimiter)
			}
			out, err = s.client.ListObjectsV2(rctx, in)
			cancel()
			if err == nil {
				break
			}
			err = s.describe(err, "list "+s.name(prefix))
			if !retryable(err) {
				return err
			}
		}
		if err != nil {
			return err
		}
		if !fn(out) || !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return nil
		}
		token = out.NextContinuationToken
	}
}
