package remote

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
)

// Config says where the bucket is and how this package behaves. The zero
// value takes everything from the environment and the defaults below.
type Config struct {
	// Endpoint is the service's base URL; "" takes AWS_ENDPOINT_URL_S3 or
	// AWS_ENDPOINT_URL, else AWS's own endpoints.
	Endpoint string
	// Region overrides AWS_REGION and the profile's region; without any,
	// us-east-1.
	Region string
	// Profile overrides AWS_PROFILE.
	Profile string
	// PathStyle chooses path-style addressing; nil means path style for a
	// custom endpoint and virtual-hosted style for AWS.
	PathStyle *bool
	// Anonymous sends unsigned requests (public buckets).
	Anonymous bool
	// RequestTimeout bounds one request, body included (default 30s).
	RequestTimeout time.Duration
	// Attempts bounds the tries of one request (default 5).
	Attempts int
	// CacheSize bounds the fetched ranges kept in memory (default 256 MiB).
	CacheSize int64
	// ReadAheadMin and ReadAheadMax bound the read-ahead window of a
	// sequential reader (defaults 2 MiB and 64 MiB); ReadAheadMax < 0
	// turns read-ahead off.
	ReadAheadMin, ReadAheadMax int64
	// DirCache is how long a listing is reused (default 60s; < 0: never).
	DirCache time.Duration
	// CacheDir, when set, keeps fetched ranges in files there too, up to
	// CacheDirSize bytes (default 4 GiB), across mounts: keyed by the
	// object's ETag, so a replaced object never matches.
	CacheDir     string
	CacheDirSize int64
	// Logger receives one line per failed read, and per range of the
	// cache directory that fails its checksum (default: stderr).
	Logger *log.Logger
}

// Errors, wrapped with the object and the range concerned.
var (
	// ErrChanged reports that the object's ETag is no longer the one
	// seen at open (the server answered 412 to If-Match).
	ErrChanged = errors.New("object changed since it was opened")
	// ErrNotFound reports a missing object or bucket.
	ErrNotFound = errors.New("not found")
	// ErrDenied reports a request refused for its credentials.
	ErrDenied = errors.New("access denied")
	// ErrRead reports a range that could not be read: the object changed
	// or every try failed. The failure has been logged.
	ErrRead = errors.New("read failed")
	// ErrShortBody reports a response body shorter than its range.
	ErrShortBody = errors.New("truncated response body")
	// ErrTooLarge reports an object (or range) larger than the caller's
	// limit (Store.Get): it is refused without its body being read.
	ErrTooLarge = errors.New("object larger than allowed")
)

// Store is one bucket of one service.
type Store struct {
	client *s3.Client
	bucket string
	cfg    Config
	cache  *rangeCache
	bufs   *bufPool   // the buffers of ranges that left the cache
	disk   *diskCache // nil without Config.CacheDir
	// diskID names the service and bucket in the disk cache's keys
	// (endpoint, region, bucket): a cache directory shared by mounts
	// of several services never serves one's object for another's.
	diskID string
	ahead  chan struct{} // bounds the read-ahead GETs in flight

	stats Stats

	listMu sync.Mutex
	lists  map[string]*listEntry
}

// Stats counts what a Store asked of the server.
type Stats struct {
	mu sync.Mutex
	// Requests counts GET, HEAD and LIST requests sent (retries included).
	Requests int64
	// Bytes counts response body bytes received by ranged GETs.
	Bytes int64
}

// Snapshot returns the counters.
func (s *Stats) Snapshot() (requests, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Requests, s.Bytes
}

func (s *Stats) add(req, n int64) {
	s.mu.Lock()
	s.Requests += req
	s.Bytes += n
	s.mu.Unlock()
}

// Stats returns the store's counters.
func (s *Store) Stats() *Stats { return &s.stats }

// Bucket returns the bucket's name.
func (s *Store) Bucket() string { return s.bucket }

// New returns a Store for bucket, configured from cfg and the
// environment. It sends no request (see Check).
func New(ctx context.Context, bucket string, cfg Config) (*Store, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 256 << 20
	}
	if cfg.ReadAheadMin <= 0 {
		cfg.ReadAheadMin = 2 << 20
	}
	if cfg.ReadAheadMax == 0 {
		cfg.ReadAheadMax = 64 << 20
	}
	if cfg.DirCache == 0 {
		cfg.DirCache = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(os.Stderr, "bloscfs: ", log.LstdFlags)
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = os.Getenv("AWS_ENDPOINT_URL_S3")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = 64
		t.MaxIdleConnsPerHost = 64
		t.ResponseHeaderTimeout = cfg.RequestTimeout
	}).WithDialerOptions(func(d *net.Dialer) { d.Timeout = 10 * time.Second })
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		// Retries are ours (Object.fetch), so that a truncated body is
		// retried too and the count stays bounded.
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
		// Failures are reported by this package, once, with context.
		config.WithLogger(logging.Nop{}),
	}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(cfg.Profile))
	}
	if cfg.Anonymous {
		opts = append(opts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
			o.UsePathStyle = true
		}
		if cfg.PathStyle != nil {
			o.UsePathStyle = *cfg.PathStyle
		}
	})
	st := &Store{
		client: client,
		bucket: bucket,
		cfg:    cfg,
		cache:  newRangeCache(cfg.CacheSize),
		bufs:   newBufPool(min(cfg.CacheSize/4, 32<<20)),
		ahead:  make(chan struct{}, 8),
		lists:  map[string]*listEntry{},
	}
	if cfg.CacheDir != "" {
		if cfg.CacheDirSize <= 0 {
			cfg.CacheDirSize = 4 << 30
		}
		if st.disk, err = openDiskCache(cfg.CacheDir, cfg.CacheDirSize, cfg.Logger.Printf); err != nil {
			return nil, err
		}
		st.diskID = cfg.Endpoint + "\x00" + awsCfg.Region + "\x00" + bucket + "\x00"
	}
	return st, nil
}

// Client returns the S3 client (for uploads).
func (s *Store) Client() *s3.Client { return s.client }

// Check makes sure the bucket exists and the credentials are accepted,
// with one request and an error that says which of them is wrong.
func (s *Store) Check(ctx context.Context) error {
	var err error
	for attempt := 1; attempt <= s.cfg.Attempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, backoff(attempt-1)); err != nil {
				return err
			}
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		s.stats.add(1, 0)
		_, err = s.client.HeadBucket(rctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)})
		cancel()
		if err == nil {
			return nil
		}
		err = s.describe(err, "bucket "+s.bucket)
		if !retryable(err) {
			return err
		}
	}
	return err
}

// describe turns an SDK error into one short line wrapping this package's
// sentinels where one applies. what names the object or bucket.
func (s *Store) describe(err error, what string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer from %s within %v: %w", what, s.endpointName(), s.cfg.RequestTimeout, err)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return fmt.Errorf("%s: cannot reach %s: %v", what, s.endpointName(), oe.Err)
	}
	status := httpStatus(err)
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	switch {
	case code == "NoSuchBucket" || (status == 404 && strings.HasPrefix(what, "bucket ")):
		return fmt.Errorf("%s: %w (no such bucket at %s)", what, ErrNotFound, s.endpointName())
	case code == "NoSuchKey" || code == "NotFound" || status == 404:
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "AccessDenied" || status == 403:
		if code == "" {
			code = "403 Forbidden"
		}
		return fmt.Errorf("%s: %w: the credentials were refused (%s)", what, ErrDenied, code)
	case code == "PreconditionFailed" || status == 412:
		return fmt.Errorf("%s: %w", what, ErrChanged)
	}
	var nc interface{ CredentialsNotFound() }
	if strings.Contains(err.Error(), "failed to retrieve credentials") || errors.As(err, &nc) {
		return fmt.Errorf("%s: no credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or use --anonymous)", what)
	}
	if status != 0 {
		return fmt.Errorf("%s: HTTP %d %s", what, status, code)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// endpointName names the service for messages (no credentials: URLs
// with user info are cut to their host).
func (s *Store) endpointName() string {
	if s.cfg.Endpoint == "" {
		return "S3"
	}
	e := s.cfg.Endpoint
	if i := strings.Index(e, "://"); i >= 0 {
		rest := e[i+3:]
		if j := strings.LastIndex(rest, "@"); j >= 0 {
			e = e[:i+3] + rest[j+1:]
		}
	}
	return e
}

// httpStatus returns the HTTP status of a failed request, or 0.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// retryable reports whether a failed request may succeed when tried
// again: server errors, throttling, timeouts and broken connections are;
// a refusal (4xx) or a changed object is not.
func retryable(err error) bool {
	if errors.Is(err, ErrChanged) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrDenied) || errors.Is(err, ErrTooLarge) || errors.Is(err, context.Canceled) {
		return false
	}
	switch st := httpStatus(err); {
	case st == 0:
		return true // timeouts, resets, truncated bodies
	case st == 408 || st == 429 || st >= 500:
		return true
	}
	return false
}

// backoff returns the pause before try number attempt (1-based).
func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt-1, 5)
	return min(d, 2*time.Second)
}

// ObjectInfo describes an object.
type ObjectInfo struct {
	Key          string
	Size         int64
	ETag         string
	LastModified time.Time
}

// Stat returns an object's size, ETag and time, with HEAD.
func (s *Store) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	var lastErr error
	for attempt := 1; attempt <= s.cfg.Attempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, backoff(attempt-1)); err != nil {
				return ObjectInfo{}, err
			}
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		s.stats.add(1, 0)
		out, err := s.client.HeadObject(rctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
		cancel()
		if err == nil {
			return ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag), LastModified: aws.ToTime(out.LastModified)}, nil
		}
		lastErr = s.describe(err, s.name(key))
		if !retryable(lastErr) {
			return ObjectInfo{}, lastErr
		}
	}
	return ObjectInfo{}, lastErr
}

// name returns how messages name an object: s3://bucket/key.
func (s *Store) name(key string) string { return "s3://" + s.bucket + "/" + key }

// Name returns s3://bucket/key.
func (s *Store) Name(key string) string { return s.name(key) }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
