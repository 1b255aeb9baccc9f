package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"unicode/utf8"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/remote"
)

func newUnpackCache() pack.BlockCache { return cache.New[pack.BlockKey](unpackCache) }

// infoRecord is what info prints for one file.
type infoRecord struct {
	Path       string            `json:"path"`
	Format     string            `json:"format"`
	Version    int               `json:"version"`
	Size       int64             `json:"size"`
	ViewSize   int64             `json:"view_size"`
	StoredSize int64             `json:"stored_size"`
	Ratio      float64           `json:"ratio"`
	Chunks     int               `json:"chunks"`
	ChunkSize  int64             `json:"chunk_size"`
	Blocksize  int               `json:"blocksize"`
	Codec      string            `json:"codec"`
	Clevel     int               `json:"clevel"`
	Typesize   int               `json:"typesize"`
	Filters    string            `json:"filters"`
	Checksum   string            `json:"checksum,omitempty"`
	Shape      []int64           `json:"shape,omitempty"`
	Dtype      string            `json:"dtype,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
}

func describe(path string) (*infoRecord, error) {
	v, err := openView(path, pack.NoCache{})
	if err != nil {
		return nil, err
	}
	defer v.Close()
	in := v.Container.Info()
	r := &infoRecord{
		Path: path, Format: in.Format, Version: in.Version, Size: in.Size, ViewSize: v.Size,
		StoredSize: in.StoredSize, Chunks: in.Chunks, ChunkSize: in.ChunkSize, Blocksize: in.Blocksize,
		Codec: in.Codec, Clevel: in.Clevel, Typesize: in.Typesize, Filters: blosc.FilterString(in.Filters, in.FiltersMeta),
		Checksum: in.Checksum,
	}
	if in.StoredSize > 0 {
		r.Ratio = float64(in.Size) / float64(in.StoredSize)
	}
	if f, ok := v.Container.(*frame.Frame); ok && f.Array() != nil {
		a := f.Array()
		r.Shape, r.Dtype = a.Shape, a.Dtype
	}
	for k, b := range in.Meta {
		if r.Meta == nil {
			r.Meta = map[string]string{}
		}
		if utf8.Valid(b) {
			r.Meta[k] = string(b)
		} else {
			r.Meta[k] = fmt.Sprintf("(%d bytes) %x", len(b), b[:min(len(b), 48)])
		}
	}
	return r, nil
}

func cmdInfo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("info", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	addRemoteFlags(fs)
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%w: info FILE...", errUsage)
	}
	var recs []*infoRecord
	failed := false
	for _, p := range files {
		r, err := describe(p)
		if err != nil {
			fmt.Fprintf(stderr, "bloscfs info: %v\n", oneLine(err))
			failed = true
			continue
		}
		recs = append(recs, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(recs); err != nil {
			return err
		}
	} else {
		for _, r := range recs {
			fmt.Fprintf(stdout, "%s: %s v%d, %d bytes in %d stored (ratio %.2f)\n", r.Path, r.Format, r.Version, r.Size, r.StoredSize, r.Ratio)
			fmt.Fprintf(stdout, "  chunks %d × %d, blocks %d, codec %s", r.Chunks, r.ChunkSize, r.Blocksize, r.Codec)
			if r.Clevel >= 0 {
				fmt.Fprintf(stdout, " clevel %d", r.Clevel)
			}
			fmt.Fprintf(stdout, ", typesize %d, filters %s", r.Typesize, r.Filters)
			if r.Checksum != "" {
				fmt.Fprintf(stdout, ", checksum %s", r.Checksum)
			}
			fmt.Fprintln(stdout)
			if r.Shape != nil {
				fmt.Fprintf(stdout, "  array %v %s (.npy view %d bytes)\n", r.Shape, r.Dtype, r.ViewSize)
			}
			keys := make([]string, 0, len(r.Meta))
			for k := range r.Meta {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(stdout, "  meta %s: %.200s\n", k, r.Meta[k])
			}
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// verifyRecord is what verify reports for one container.
type verifyRecord struct {
	Path   string `json:"path"`
	Format string `json:"format,omitempty"`
	Size   int64  `json:"size"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
}

// verifyOne decodes every chunk of a container (checksums are verified as
// chunks load).
func verifyOne(path string, stderr io.Writer) verifyRecord {
	rec := verifyRecord{Path: path}
	// The container's own bytes, not the .npy view: every chunk once.
	c, closer, err := openContainer(path, pack.NoCache{})
	if err != nil {
		rec.Error = oneLine(err)
		return rec
	}
	defer closer.Close()
	rec.Format, rec.Size = c.Info().Format, c.Size()
	v := all.ContainerView(c)
	pb := newBar(stderr, v.Size, "verify "+filepath.Base(path))
	if _, err := v.WriteToProgress(io.Discard, pb.Add); err != nil {
		rec.Error = oneLine(err)
		return rec
	}
	pb.Finish()
	rec.OK = true
	return rec
}

// isContainer tells, during a directory walk, whether a file is one to
// verify: a container suffix, or content with a recognised magic.
func isContainer(path string) bool {
	if _, ok := all.PlainName(filepath.Base(path)); ok {
		return true // a damaged header must be reported, not skipped
	}
	f, err := os.Open(path)
	if err != nil {
		return true // report the error
	}
	defer f.Close()
	head := make([]byte, pack.HeadLen)
	n, _ := io.ReadFull(f, head)
	fm := pack.Sniff(head[:n])
	return fm != nil && fm.Name != "chunk" // a bare chunk has no magic: only by name
}

func cmdVerify(args []string, stdout, stderr io.Writer) error {
	flags := newFlags("verify", stderr)
	asJSON := flags.Bool("json", false, "print JSON")
	addRemoteFlags(flags)
	paths, err := parseInterspersed(flags, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("%w: verify PATH...", errUsage)
	}
	var recs []verifyRecord
	for _, root := range paths {
		if remote.IsURL(root) {
			recs = append(recs, verifyRemote(root, stderr)...)
			continue
		}
		st, err := os.Stat(root)
		if err != nil {
			recs = append(recs, verifyRecord{Path: root, Error: oneLine(err)})
			continue
		}
		if !st.IsDir() || pack.SniffDir(root) != nil {
			recs = append(recs, verifyOne(root, stderr))
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				recs = append(recs, verifyRecord{Path: p, Error: oneLine(err)})
				return nil
			}
			if d.IsDir() {
				if p != root && pack.SniffDir(p) != nil {
					recs = append(recs, verifyOne(p, stderr))
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() && isContainer(p) {
				recs = append(recs, verifyOne(p, stderr))
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	bad := 0
	for _, r := range recs {
		if !r.OK {
			bad++
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(recs); err != nil {
			return err
		}
	} else {
		for _, r := range recs {
			if r.OK {
				fmt.Fprintf(stdout, "OK   %s (%s, %d bytes)\n", r.Path, r.Format, r.Size)
			} else {
				fmt.Fprintf(stdout, "FAIL %s: %s\n", r.Path, r.Error)
			}
		}
		fmt.Fprintf(stdout, "%d verified, %d failed\n", len(recs)-bad, bad)
	}
	if bad > 0 {
		return errReported
	}
	return nil
}
