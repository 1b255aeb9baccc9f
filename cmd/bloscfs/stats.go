package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	bfs "github.com/bloscfs/bloscfs/fs"
	"golang.org/x/sys/unix"
)

// readStats reads the statistics of the mount at mnt from its root's
// StatsXattr.
func readStats(mnt string) ([]byte, error) {
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Getxattr(mnt, bfs.StatsXattr, buf)
		if errors.Is(err, unix.ERANGE) && len(buf) < 16<<20 {
			buf = make([]byte, 4*len(buf))
			continue
		}
		if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
			abs, _ := filepath.Abs(mnt)
			if ok, _ := bfs.IsMountpoint(abs); !ok {
				return nil, fmt.Errorf("%s: not a mountpoint (give the directory where bloscfs is mounted)", mnt)
			}
			return nil, fmt.Errorf("%s: not a bloscfs mount (or one too old to report statistics)", mnt)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mnt, err)
		}
		return buf[:n], nil
	}
}

// mib formats bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func cmdStats(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("stats", stdout)
	asJSON := fs.Bool("json", false, "print the counters as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: stats MOUNTPOINT", errUsage)
	}
	b, err := readStats(pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	var s bfs.Stats
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: bad statistics: %w", pos[0], err)
	}
	c := s.Cache
	ratio := 0.0
	if c.Hits+c.Misses > 0 {
		ratio = 100 * float64(c.Hits) / float64(c.Hits+c.Misses)
	}
	fmt.Fprintf(stdout, "%s: source %s, up %.0f s\n", pos[0], s.Source, s.UptimeSeconds)
	fmt.Fprintf(stdout, "cache:       %d hits, %d misses (%.1f%% hits), %d decodes, %d evictions\n", c.Hits, c.Misses, ratio, c.Loads, c.Evictions)
	fmt.Fprintf(stdout, "             holds %s of %s in %d blocks\n", mib(c.Bytes), mib(c.MaxBytes), c.Entries)
	names := make([]string, 0, len(s.Codecs))
	for name := range s.Codecs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d := s.Codecs[name]
		speed := ""
		if d.DecodeSeconds > 0 {
			speed = fmt.Sprintf(" (%.0f MiB/s)", float64(d.DecodedBytes)/(1<<20)/d.DecodeSeconds)
		}
		fmt.Fprintf(stdout, "decode %-5s %d blocks, %s in %.3f s%s\n", name+":", d.Blocks, mib(d.DecodedBytes), d.DecodeSeconds, speed)
	}
	fmt.Fprintf(stdout, "open files:  %d\n", s.OpenFiles)
	if len(s.Passthrough) > 0 {
		fmt.Fprintf(stdout, "passthrough: %d plain files read by the kernel itself: %s\n", len(s.Passthrough), strings.Join(s.Passthrough, ", "))
	} else {
		fmt.Fprintf(stdout, "passthrough: no open plain file read by the kernel itself\n")
	}
	fmt.Fprintf(stdout, "read-ahead:  %d runs, %s asked, %d READs found their bytes asked for\n", s.ReadAhead.Runs, mib(s.ReadAhead.Bytes), s.ReadAhead.Hits)
	if r := s.Remote; r != nil {
		fmt.Fprintf(stdout, "remote:      %d requests, %s fetched\n", r.Requests, mib(r.FetchedBytes))
	}
	return nil
}
