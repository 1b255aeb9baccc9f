package fs

import (
	"bytes"
	"encoding/json"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bcache "github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
)

// StatsXattr is the extended attribute of a mount's root that holds the
// mount's statistics as JSON (see Stats). It is not listed, so that
// copies of the root do not copy it.
const StatsXattr = "user.bloscfs.stats"

// Stats are a mount's counters: enough to tell why reading is slow (a
// cache too small for the working set, a slow codec, read-ahead that does
// not keep up).
type Stats struct {
	// Source is the mounted directory, UptimeSeconds the mount's age.
	Source        string  `json:"source"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	// Cache is the decoded-block cache shared by all files.
	Cache CacheStats `json:"cache"`
	// Codecs has the decoding cost per codec name.
	Codecs map[string]CodecStat `json:"codecs"`
	// OpenFiles counts the open handles of compressed files.
	OpenFiles int64 `json:"open_files"`
	// Passthrough names the open plain files (paths in the mount) whose
	// reads and writes the kernel serves from the source file itself
	// (FUSE passthrough: root, kernel 6.9+): the kernel was given their
	// source file at open, and no READ or WRITE of theirs has reached the
	// daemon since.
	Passthrough []string       `json:"passthrough"`
	ReadAhead   ReadAheadStats `json:"read_ahead"`
	Listing     ListingStats   `json:"listing"`
	// Remote is what a remote mount asked of the object store (nil for a
	// local mount).
	Remote *RemoteStats `json:"remote,omitempty"`
}

// RemoteStats count a remote mount's requests to the object store.
type RemoteStats struct {
	// Requests counts GET, HEAD and LIST requests sent, retries
	// included; FetchedBytes the body bytes of the ranged GETs.
	Requests     int64 `json:"requests"`
	FetchedBytes int64 `json:"fetched_bytes"`
}

// CacheStats are the decoded-block cache's counters.
type CacheStats struct {
	// Hits and Misses count block lookups; a miss decodes the block
	// (Loads) or waits for a decode already running.
	Hits      int64 `json:"hits"`
	Misses    int64 `json:"misses"`
	Loads     int64 `json:"loads"`
	Evictions int64 `json:"evictions"`
	// Bytes is what the cache holds, of MaxBytes, in Entries blocks.
	Bytes    int64 `json:"bytes"`
	MaxBytes int64 `json:"max_bytes"`
	Entries  int   `json:"entries"`
}

// CodecStat is what decoding the blocks of one codec cost.
type CodecStat struct {
	Blocks        int64   `json:"blocks"`
	DecodedBytes  int64   `json:"decoded_bytes"`
	DecodeSeconds float64 `json:"decode_seconds"`
}

// ReadAheadStats count the read-ahead of sequential readers.
type ReadAheadStats struct {
	// Runs counts read-aheads started, Bytes the bytes they were asked
	// to decode.
	Runs  int64 `json:"runs"`
	Bytes int64 `json:"bytes"`
	// Hits counts sequential READs that lay wholly in bytes a read-ahead
	// had already been asked to decode.
	Hits int64 `json:"hits"`
}

// ListingStats count what listing directories cost.
type ListingStats struct {
	// Listed counts directory listings made; Kept counts opens of a
	// directory whose listing the kernel was told to keep (unchanged
	// since the kernel was given it), which cost no listing.
	Listed int64 `json:"listed"`
	Kept   int64 `json:"kept"`
	// Probed counts containers opened to learn their plain size; a
	// listing of files probed before (same inode, size and times) opens
	// none.
	Probed int64 `json:"probed"`
}

// counters are the mount's own counters (the cache keeps its own).
type counters struct {
	start                            time.Time
	openFiles                        atomic.Int64
	aheadRuns, aheadBytes, aheadHits atomic.Int64
	dirsListed, dirsKept, probed     atomic.Int64
	codecs                           sync.Map // codec name → *codecCounter

	passMu sync.Mutex
	passed map[*plainFile]string // open plain files handed to the kernel, by path
}

type codecCounter struct{ blocks, bytes, nanos atomic.Int64 }

// codec returns the counters of a codec.
func (c *counters) codec(name string) *codecCounter {
	if v, ok := c.codecs.Load(name); ok {
		return v.(*codecCounter)
	}
	v, _ := c.codecs.LoadOrStore(name, &codecCounter{})
	return v.(*codecCounter)
}

// Stats returns the mount's counters.
func (f *FS) Stats() Stats {
	cs := f.cache.Stats()
	s := Stats{
		Source:        f.source,
		UptimeSeconds: time.Since(f.stats.start).Seconds(),
		Cache: CacheStats{Hits: cs.Hits, Misses: cs.Misses, Loads: cs.Loads, Evictions: cs.Evictions,
			Bytes: cs.Bytes, MaxBytes: cs.MaxBytes, Entries: cs.Entries},
		Codecs:    map[string]CodecStat{},
		OpenFiles: f.stats.openFiles.Load(),
		ReadAhead: ReadAheadStats{Runs: f.stats.aheadRuns.Load(), Bytes: f.stats.aheadBytes.Load(), Hits: f.stats.aheadHits.Load()},
		Listing:   ListingStats{Listed: f.stats.dirsListed.Load(), Kept: f.stats.dirsKept.Load(), Probed: f.stats.probed.Load()},
	}
	if f.remote != nil {
		s.Remote = f.remote()
	}
	s.Passthrough = f.stats.passthrough()
	var names []string
	f.stats.codecs.Range(func(k, _ any) bool { names = append(names, k.(string)); return true })
	sort.Strings(names)
	for _, name := range names {
		c := f.stats.codec(name)
		s.Codecs[name] = CodecStat{Blocks: c.blocks.Load(), DecodedBytes: c.bytes.Load(), DecodeSeconds: float64(c.nanos.Load()) / 1e9}
	}
	return s
}

// statCache is the block cache as one file sees it: it times the file's
// decodes and counts them under the file's codec.
type statCache struct {
	*bcache.Cache[pack.BlockKey]
	stats *counters
	codec atomic.Pointer[codecCounter]
}

// blockCache returns the cache for a file about to be opened; setCodec
// names its codec once it is known.
func (f *FS) blockCache() *statCache {
	return &statCache{Cache: f.cache, stats: &f.stats}
}

func (c *statCache) setCodec(name string) { c.codec.Store(c.stats.codec(name)) }

// The shared cache's optional interfaces reach the readers through the
// wrapper, since it embeds the cache itself, not the BlockCache interface
// (which would hide them, and a reader would fall back to bounds that
// --cache-size does not set): the largest block a reader may decode, and
// the parsed chunks charged to the cache's budget.
var (
	_ pack.MaxBlocker               = (*statCache)(nil)
	_ pack.Charger                  = (*statCache)(nil)
	_ interface{ MaxBytes() int64 } = (*statCache)(nil)
	_ pack.DecodeObserver           = (*statCache)(nil)
)

// Decoded counts a block a reader decoded straight into its buffer.
func (c *statCache) Decoded(n int, d time.Duration) { c.count(n, d, true) }

// count adds a decode of n bytes taking d (a failed one counts its time
// only) under the file's codec.
func (c *statCache) count(n int, d time.Duration, ok bool) {
	cc := c.codec.Load()
	if cc == nil {
		cc = c.stats.codec("unknown")
	}
	if ok {
		cc.blocks.Add(1)
		cc.bytes.Add(int64(n))
	}
	cc.nanos.Add(int64(d))
}

// Acquire times the load of a missing block.
func (c *statCache) Acquire(key pack.BlockKey, load func() ([]byte, error)) (*bcache.Ref, error) {
	return c.Cache.Acquire(key, func() ([]byte, error) {
		t := time.Now()
		b, err := load()
		c.count(len(b), time.Since(t), err == nil)
		return b, err
	})
}

// getStats answers a Getxattr of StatsXattr.
func (f *FS) getStats(dest []byte) (uint32, syscall.Errno) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f.Stats()); err != nil {
		return 0, syscall.EIO
	}
	b := bytes.TrimSpace(buf.Bytes())
	if len(dest) == 0 {
		return uint32(len(b)), 0
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

// passthrough returns the sorted paths of the open plain files passed
// through, each once.
func (c *counters) passthrough() []string {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	seen := map[string]bool{}
	names := []string{}
	for _, name := range c.passed {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// setPassed records (on) or forgets a plain file handed to the kernel.
func (c *counters) setPassed(f *plainFile, name string, on bool) {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	if on {
		if c.passed == nil {
			c.passed = map[*plainFile]string{}
		}
		c.passed[f] = name
	} else {
		delete(c.passed, f)
	}
}
