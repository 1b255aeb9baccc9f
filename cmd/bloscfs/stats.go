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
	printStats(stdout, pos[0], s)
	return nil
}

// plural is "1 block", "2 blocks".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// printStats prints a mount's counters as a table: a label column as
// wide as the widest label, then the figures in words.
func printStats(w io.Writer, mnt string, s bfs.Stats) {
	c := s.Cache
	ratio := 0.0
	if c.Hits+c.Misses > 0 {
		ratio = 100 * float64(c.Hits) / float64(c.Hits+c.Misses)
	}
	type row struct{ label, text string }
	rows := []row{
		{"source", fmt.Sprintf("%s, mounted %.0f s ago", s.Source, s.UptimeSeconds)},
		{"cache", fmt.Sprintf("%s, %s (%.1f%% hits), %s, %s", plural(c.Hits, "hit", "hits"), plural(c.Misses, "miss", "misses"),
			ratio, plural(c.Loads, "decode", "decodes"), plural(c.Evictions, "eviction", "evictions"))},
		{"", fmt.Sprintf("holds %s of %s in %s", mib(c.Bytes), mib(c.MaxBytes), plural(int64(c.Entries), "block", "blocks"))},
	}
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
		rows = append(rows, row{"decode " + name, fmt.Sprintf("%s, %s in %.3f s%s", plural(d.Blocks, "block", "blocks"), mib(d.DecodedBytes), d.DecodeSeconds, speed)})
	}
	rows = append(rows, row{"open files", fmt.Sprint(s.OpenFiles)})
	if len(s.Passthrough) > 0 {
		rows = append(rows, row{"passthrough", fmt.Sprintf("%s read by the kernel itself: %s", plural(int64(len(s.Passthrough)), "plain file", "plain files"), strings.Join(s.Passthrough, ", "))})
	} else {
		rows = append(rows, row{"passthrough", "no open plain file read by the kernel itself"})
	}
	ra := s.ReadAhead
	found := "READs found all their bytes"
	if ra.Hits == 1 {
		found = "READ found all its bytes"
	}
	rows = append(rows, row{"read-ahead", fmt.Sprintf("%s started, %s asked for; %d %s already decoded by one",
		plural(ra.Runs, "read-ahead", "read-aheads"), mib(ra.Bytes), ra.Hits, found)})
	l := s.Listing
	rows = append(rows, row{"listing", fmt.Sprintf("%s made, %s kept by the kernel; %s opened to learn their plain size",
		plural(l.Listed, "directory listing", "directory listings"), plural(l.Kept, "listing", "listings"), plural(l.Probed, "container", "containers"))})
	if r := s.Remote; r != nil {
		rows = append(rows, row{"remote", fmt.Sprintf("%s, %s fetched", plural(r.Requests, "request", "requests"), mib(r.FetchedBytes))})
	}
	width := 0
	for _, r := range rows {
		width = max(width, len(r.label)+1)
	}
	fmt.Fprintf(w, "%s:\n", mnt)
	for _, r := range rows {
		label := r.label
		if label != "" {
			label += ":"
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, label, r.text)
	}
}
