// Package fakes3 is an in-process S3 server for tests: one bucket of
// in-memory objects served path-style (HEAD and GET with Range and
// If-Match, ListObjectsV2 with a delimiter and pagination), which counts
// the requests and body bytes it serves; and Faults, a reverse proxy that
// injects failures in front of any server.
package fakes3

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a fake S3 service holding one bucket.
type Server struct {
	Bucket string
	// URL is the endpoint (http://127.0.0.1:port).
	URL string
	// MaxKeys is the page size of listings (default 1000).
	MaxKeys int

	srv      *httptest.Server
	mu       sync.Mutex
	objs     map[string]*object
	requests atomic.Int64
	bytes    atomic.Int64
	emptyIM  atomic.Int64 // requests with an empty If-Match
	logMu    sync.Mutex
	log      []string
}

type object struct {
	data  []byte
	etag  string
	mtime time.Time
}

// New starts a server for bucket on 127.0.0.1.
func New(bucket string) *Server {
	s := &Server{Bucket: bucket, objs: map[string]*object{}, MaxKeys: 1000}
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Put stores (or replaces) an object.
func (s *Server) Put(key string, data []byte) {
	sum := md5.Sum(data)
	s.mu.Lock()
	s.objs[key] = &object{data: data, etag: `"` + hex.EncodeToString(sum[:]) + `"`, mtime: time.Now().UTC().Truncate(time.Second)}
	s.mu.Unlock()
}

// PutETag stores (or replaces) an object with the ETag given, quoted as
// S3 quotes it: several objects may then share one, as objects of two
// services can. An empty etag makes an object that is served without
// one, as some S3-compatible services do.
func (s *Server) PutETag(key string, data []byte, etag string) {
	if etag != "" {
		etag = `"` + etag + `"`
	}
	s.mu.Lock()
	s.objs[key] = &object{data: data, etag: etag, mtime: time.Now().UTC().Truncate(time.Second)}
	s.mu.Unlock()
}

// EmptyIfMatch returns how many requests carried an If-Match header with
// no value (which matches no object).
func (s *Server) EmptyIfMatch() int64 { return s.emptyIM.Load() }

// Counts returns the requests served and the body bytes sent by GETs.
func (s *Server) Counts() (requests, bytes int64) { return s.requests.Load(), s.bytes.Load() }

// ResetCounts zeroes the counters.
func (s *Server) ResetCounts() {
	s.requests.Store(0)
	s.bytes.Store(0)
	s.logMu.Lock()
	s.log = nil
	s.logMu.Unlock()
}

// Log returns the requests served since the last ResetCounts, each as
// its method, key and Range header (a listing as "LIST prefix"), for a test to show when a count is
// off.
func (s *Server) Log() []string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return append([]string(nil), s.log...)
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

// Write counts p before it sends it: a client may have the whole body,
// and its caller reset the counts, before Write returns, and a count
// added late would land in the next measurement.
func (c countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n - len(p)))
	return n, err
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	s.logMu.Lock()
	line := r.Method + " " + r.URL.Path + " " + r.Header.Get("Range")
	if p := r.URL.Query().Get("prefix"); r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
		line = "LIST " + p // a listing: by its prefix
	}
	s.log = append(s.log, line)
	s.logMu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	if bucket != s.Bucket {
		writeErr(w, 404, "NoSuchBucket")
		return
	}
	switch {
	case key == "" && r.Method == http.MethodHead:
		w.WriteHeader(200)
	case key == "" && r.Method == http.MethodGet:
		s.list(w, r)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		s.mu.Lock()
		o := s.objs[key]
		s.mu.Unlock()
		if o == nil {
			writeErr(w, 404, "NoSuchKey")
			return
		}
		if v, ok := r.Header["If-Match"]; ok && (len(v) == 0 || v[0] == "") {
			s.emptyIM.Add(1)
		}
		if im := r.Header.Get("If-Match"); im != "" && im != o.etag {
			writeErr(w, 412, "PreconditionFailed")
			return
		}
		if o.etag != "" {
			w.Header().Set("ETag", o.etag)
		}
		http.ServeContent(countingWriter{w, &s.bytes}, r, "", o.mtime, bytes.NewReader(o.data))
	default:
		writeErr(w, 501, "NotImplemented")
	}
}

func writeErr(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, code)
}

type listResult struct {
	XMLName               xml.Name     `xml:"ListBucketResult"`
	Name                  string       `xml:"Name"`
	Prefix                string       `xml:"Prefix"`
	KeyCount              int          `xml:"KeyCount"`
	MaxKeys               int          `xml:"MaxKeys"`
	IsTruncated           bool         `xml:"IsTruncated"`
	NextContinuationToken string       `xml:"NextContinuationToken,omitempty"`
	Contents              []listObject `xml:"Contents"`
	CommonPrefixes        []listPrefix `xml:"CommonPrefixes"`
}

type listObject struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
}

type listPrefix struct {
	Prefix string `xml:"Prefix"`
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	prefix, delim, after := q.Get("prefix"), q.Get("delimiter"), q.Get("continuation-token")
	s.mu.Lock()
	keys := make([]string, 0, len(s.objs))
	for k := range s.objs {
		keys = append(keys, k)
	}
	objs := map[string]*object{}
	for k, v := range s.objs {
		objs[k] = v
	}
	s.mu.Unlock()
	sort.Strings(keys)
	res := listResult{Name: s.Bucket, Prefix: prefix, MaxKeys: s.MaxKeys}
	seen := map[string]bool{}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) || k <= after {
			continue
		}
		if res.KeyCount == s.MaxKeys {
			res.IsTruncated = true
			break
		}
		rest := k[len(prefix):]
		if i := strings.Index(rest, delim); delim != "" && i >= 0 {
			p := prefix + rest[:i+len(delim)]
			if !seen[p] {
				seen[p] = true
				res.CommonPrefixes = append(res.CommonPrefixes, listPrefix{p})
				res.KeyCount++
				res.NextContinuationToken = p + "\xff"
			}
			continue
		}
		o := objs[k]
		res.Contents = append(res.Contents, listObject{Key: k, LastModified: o.mtime.Format("2006-01-02T15:04:05.000Z"), ETag: o.etag, Size: int64(len(o.data))})
		res.KeyCount++
		res.NextContinuationToken = k
	}
	if !res.IsTruncated {
		res.NextContinuationToken = ""
	}
	b, _ := xml.Marshal(res)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+len(xml.Header)))
	w.Write([]byte(xml.Header))
	w.Write(b)
}

// Flush passes a flush on.
func (c countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer (for http.ResponseController).
func (c countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
