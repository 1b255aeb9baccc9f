// Package remote reads and lists objects in S3-compatible object storage
// through aws-sdk-go-v2. It knows nothing of Blosc: an Object is an
// io.ReaderAt over ranged GETs, each carrying If-Match with the ETag seen
// at open, with per-request deadlines, bounded retries, a byte-bounded
// in-memory cache of fetched ranges shared by the objects of a Store, and
// parallel read-ahead for sequential readers.
//
// The endpoint and credentials come as every S3 tool finds them:
// AWS_ENDPOINT_URL (or Config.Endpoint), AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, AWS_PROFILE with
// ~/.aws/config and ~/.aws/credentials, AWS_REGION. A custom endpoint
// uses path-style addressing unless told otherwise. Credentials never
// appear in errors or logs from this package.
package remote
