package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/cache"
	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/bloscpack"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/remote"
	"github.com/bloscfs/bloscfs/zarr"
)

func newUnpackCache() pack.BlockCache { return cache.New[pack.BlockKey](unpackCache) }

// infoRecord is what info prints for one file.
type infoRecord struct {
	Path    string `json:"path"`
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Size is the plain bytes: what unpack writes and a mount shows (a
	// .b2nd's .npy file); ViewSize is the same, under its older name.
	Size       int64 `json:"size"`
	ViewSize   int64 `json:"view_size"`
	StoredSize int64 `json:"stored_size"`
	// PaddedSize is what a .b2nd's chunks hold: the array padded to
	// whole chunks (0 for other files).
	PaddedSize int64 `json:"padded_size,omitempty"`
	// Ratio is Size ÷ StoredSize, as pack and unpack report it.
	Ratio     float64 `json:"ratio"`
	Chunks    int     `json:"chunks"`
	ChunkSize int64   `json:"chunk_size"`
	Blocksize int     `json:"blocksize"`
	Codec     string  `json:"codec"`
	Clevel    *int    `json:"clevel,omitempty"` // not recorded by Bloscpack
	Typesize  int     `json:"typesize"`
	Filters   string  `json:"filters"`
	Checksum  string  `json:"checksum,omitempty"`
	// Bloscpack's header: the last chunk's size, the room for appended
	// chunks, whether there is an offsets table and a metadata section.
	LastChunk    *int64        `json:"last_chunk,omitempty"`
	MaxAppChunks *int64        `json:"max_app_chunks,omitempty"`
	Offsets      *bool         `json:"offsets,omitempty"`
	ChunkStarts  []int64       `json:"chunk_offsets,omitempty"` // in the file
	Metadata     *metadataInfo `json:"metadata_section,omitempty"`
	// A .b2nd array.
	Shape      []int64 `json:"shape,omitempty"`
	ChunkShape []int32 `json:"chunkshape,omitempty"`
	BlockShape []int32 `json:"blockshape,omitempty"`
	Dtype      string  `json:"dtype,omitempty"`
	// Meta holds metalayers, vlmetalayers and Bloscpack metadata: text
	// as it is, the b2nd metalayer decoded, other binary as hex.
	Meta map[string]string `json:"meta,omitempty"`
}

// metadataInfo describes a Bloscpack metadata section.
type metadataInfo struct {
	Format   string `json:"format"`
	Codec    string `json:"codec"`
	Level    int    `json:"level"`
	Size     int64  `json:"size"`
	MaxSize  int64  `json:"max_size"`
	Stored   int64  `json:"stored_size"`
	Checksum string `json:"checksum"`
}

// errorRecord is what info --json prints for a file it cannot read.
type errorRecord struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// describe opens a container (through the store cfg configures, for an
// s3:// path) and says how it is stored.
func describe(path string, cfg remote.Config) (*infoRecord, error) {
	v, err := openView(path, cfg, pack.NoCache{})
	if err != nil {
		return nil, err
	}
	defer v.Close()
	in := v.Container.Info()
	r := &infoRecord{
		Path: path, Format: in.Format, Version: in.Version, Size: v.Size, ViewSize: v.Size,
		StoredSize: in.StoredSize, Chunks: in.Chunks, ChunkSize: in.ChunkSize, Blocksize: in.Blocksize,
		Codec: in.Codec, Typesize: in.Typesize, Filters: blosc.FilterString(in.Filters, in.FiltersMeta),
		Checksum: in.Checksum,
	}
	if in.Clevel >= 0 {
		r.Clevel = &in.Clevel
	}
	if in.StoredSize > 0 {
		r.Ratio = float64(r.Size) / float64(in.StoredSize)
	}
	if f, ok := v.Container.(*bloscpack.File); ok {
		h := f.Header
		offsets := h.Options&0x01 != 0 // bloscpack's "offsets" option
		r.LastChunk, r.MaxAppChunks, r.Offsets = &h.LastChunk, &h.MaxAppChunks, &offsets
		r.ChunkStarts = f.FileOffsets()
		if m := f.Meta; m != nil {
			codec := map[int]string{0: "none", 1: "zlib"}[m.Codec]
			r.Metadata = &metadataInfo{Format: m.Format, Codec: codec, Level: m.Level, Size: m.Size,
				MaxSize: m.MaxSize, Stored: m.CompSize, Checksum: bloscpack.Checksums[m.Checksum].Name}
		}
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
	if z, ok := v.Container.(*zarr.DirArray); ok {
		r.StoredSize = z.StoredSize()
		if r.StoredSize > 0 {
			r.Ratio = float64(in.Size) / float64(r.StoredSize)
		}
		r.Shape, r.Dtype = z.Shape, z.Descr()
		r.Meta = z.Describe()
	}
	if f, ok := v.Container.(*frame.Frame); ok && f.Array() != nil {
		a := f.Array()
		r.Shape, r.ChunkShape, r.BlockShape, r.Dtype = a.Shape, a.ChunkShape, a.BlockShape, a.Dtype
		r.PaddedSize = in.Size
		name := "b2nd"
		if a.Legacy {
			name = "caterva"
		}
		if _, ok := r.Meta[name]; ok {
			r.Meta[name] = fmt.Sprintf("version %d, shape %v, chunkshape %v, blockshape %v, dtype %s", a.Version, a.Shape, a.ChunkShape, a.BlockShape, a.Dtype)
		}
	}
	return r, nil
}

// walkContainers calls fn for every path to describe or verify: a file
// or a container directory as it is, and in a directory tree every file
// with a container suffix or magic and every sparse frame directory.
// Paths that cannot be read are passed with their error.
func walkContainers(roots []string, fn func(path string, err error)) error {
	for _, root := range roots {
		if remote.IsURL(root) {
			fn(root, nil) // an object: not walked (verify walks prefixes itself)
			continue
		}
		if _, inner, ok := treeArg(root); ok && inner != "" {
			fn(root, nil) // a path inside a tree
			continue
		}
		st, err := os.Stat(root)
		if err != nil {
			fn(root, err)
			continue
		}
		if !st.IsDir() || pack.SniffDir(root) != nil || treeNamed(filepath.Base(root), true) {
			fn(root, nil)
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				fn(p, err)
				return nil
			}
			if d.IsDir() {
				if p != root && (pack.SniffDir(p) != nil || treeNamed(d.Name(), true)) {
					fn(p, nil)
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() && isContainer(p) {
				fn(p, nil)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// newJSON returns an indenting encoder that leaves <, > and & as they are.
func newJSON(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc
}

func cmdInfo(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("info", stdout)
	asJSON := fs.Bool("json", false, "print JSON: one object per file, {\"path\", \"error\"} for a file that cannot be read")
	rf := addRemoteFlagsFor(fs, remoteConn)
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	cfg, err := rf.config()
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("%w: info PATH...", errUsage)
	}
	recs := []any{}
	failed := false
	var local []string
	for _, p := range files {
		if msg := inMount(p, "info"); msg != "" {
			failed = true
			if !*asJSON {
				fmt.Fprintf(stderr, "bloscfs info: %s: %s\n", p, msg)
			}
			recs = append(recs, errorRecord{Path: p, Error: msg})
			continue
		}
		local = append(local, p)
	}
	err = walkContainers(local, func(p string, err error) {
		var rs []*infoRecord
		if src, inner, ok := treeArg(p); ok && err == nil {
			rs, err = describeTree(src, inner, cfg)
			if err != nil && !slices.Contains(local, p) && errors.Is(err, pack.ErrFormat) {
				return // a file named as a tree that holds none, met in a walk
			}
		} else if err == nil {
			var r *infoRecord
			r, err = describe(p, cfg)
			rs = []*infoRecord{r}
		}
		if err != nil {
			failed = true
			msg := errorText(p, err)
			if !*asJSON {
				fmt.Fprintf(stderr, "bloscfs info: %s: %s\n", p, msg)
			}
			recs = append(recs, errorRecord{Path: p, Error: msg})
			return
		}
		for _, r := range rs {
			recs = append(recs, r)
			if !*asJSON {
				printInfo(stdout, r)
			}
		}
	})
	if err != nil {
		return err
	}
	if *asJSON {
		if err := newJSON(stdout).Encode(recs); err != nil {
			return err
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// printInfo prints a record as text.
func printInfo(stdout io.Writer, r *infoRecord) {
	version := ""
	if r.Version > 0 {
		version = fmt.Sprintf(" v%d", r.Version)
	}
	if r.StoredSize > 0 {
		fmt.Fprintf(stdout, "%s: %s%s, %d plain bytes in %d stored (ratio %.2f)\n", r.Path, r.Format, version, r.Size, r.StoredSize, r.Ratio)
	} else {
		// A file of a tree whose stored size is not known apart.
		fmt.Fprintf(stdout, "%s: %s%s, %d plain bytes\n", r.Path, r.Format, version, r.Size)
	}
	if r.Chunks > 0 || r.Codec != "" && r.Codec != "none" {
		fmt.Fprintf(stdout, "  chunks %d × %d, blocks %d, codec %s", r.Chunks, r.ChunkSize, r.Blocksize, r.Codec)
		if r.Clevel != nil {
			fmt.Fprintf(stdout, " clevel %d", *r.Clevel)
		}
		fmt.Fprintf(stdout, ", typesize %d, filters %s", r.Typesize, r.Filters)
		if r.Checksum != "" {
			fmt.Fprintf(stdout, ", checksum %s", r.Checksum)
		}
		fmt.Fprintln(stdout)
	}
	if r.LastChunk != nil {
		fmt.Fprintf(stdout, "  last_chunk %d, max_app_chunks %d, offsets %v\n", *r.LastChunk, *r.MaxAppChunks, *r.Offsets)
		if n := len(r.ChunkStarts); n > 0 {
			more := ""
			if n > 8 {
				more = fmt.Sprintf(" ... (%d chunks)", n)
			}
			fmt.Fprintf(stdout, "  chunk offsets %v%s\n", r.ChunkStarts[:min(n, 8)], more)
		}
	}
	if m := r.Metadata; m != nil {
		fmt.Fprintf(stdout, "  metadata section: %s, codec %s level %d, %d bytes (%d stored, room for %d), checksum %s\n", m.Format, m.Codec, m.Level, m.Size, m.Stored, m.MaxSize, m.Checksum)
	}
	if r.Shape != nil && r.ChunkShape == nil {
		fmt.Fprintf(stdout, "  array %v %s (.npy view %d bytes)\n", r.Shape, r.Dtype, r.ViewSize)
	} else if r.Shape != nil {
		fmt.Fprintf(stdout, "  array %v %s, chunks %v, blocks %v; the plain bytes are its .npy file, the chunks hold %d bytes padded to whole chunks\n", r.Shape, r.Dtype, r.ChunkShape, r.BlockShape, r.PaddedSize)
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

// errorText is an error's one-line message without a leading path, which
// the caller prints itself.
func errorText(path string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return pe.Op + ": " + oneLine(pe.Err)
	}
	return trimPath(path, oneLine(err))
}

// trimPath drops a leading "path: " from an error message.
func trimPath(path, msg string) string {
	for _, p := range []string{path, filepath.Clean(path)} {
		if rest, ok := strings.CutPrefix(msg, p+": "); ok {
			return rest
		}
	}
	return msg
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
func verifyOne(path string, cfg remote.Config, stderr io.Writer) verifyRecord {
	rec := verifyRecord{Path: path}
	// The container's own bytes, not the .npy view: every chunk once.
	c, closer, err := openContainer(path, cfg, pack.NoCache{})
	if err != nil {
		rec.Error = oneLine(err)
		return rec
	}
	defer closer.Close()
	rec.Format, rec.Size = c.Info().Format, c.Size()
	v := all.ContainerView(c)
	pb := newBar(stderr, v.Size, "verify "+filepath.Base(path))
	if err := v.Verify(pb.Add); err != nil {
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
	if _, ok := all.PlainName(filepath.Base(path)); ok || treeNamed(filepath.Base(path), false) {
		return true // a damaged header must be reported, not skipped
	}
	f, _, err := pack.OpenSource(path, false) // a FIFO must not block the walk
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
	flags := newFlags("verify", stdout)
	asJSON := flags.Bool("json", false, "print JSON")
	rf := addRemoteFlagsFor(flags, remoteRead)
	paths, err := parseFlags(flags, args)
	if err != nil {
		return err
	}
	cfg, err := rf.config()
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("%w: verify PATH...", errUsage)
	}
	for _, p := range paths {
		if msg := inMount(p, "verify"); msg != "" {
			return fmt.Errorf("%s: %s", p, msg)
		}
	}
	var recs []verifyRecord
	var local []string
	for _, p := range paths {
		if remote.IsURL(p) {
			recs = append(recs, verifyRemote(p, cfg, stderr)...)
		} else {
			local = append(local, p)
		}
	}
	err = walkContainers(local, func(p string, err error) {
		if err != nil {
			recs = append(recs, verifyRecord{Path: p, Error: errorText(p, err)})
			return
		}
		if src, inner, ok := treeArg(p); ok {
			trs, err := verifyTree(src, inner, cfg, stderr)
			if !slices.Contains(local, p) && errors.Is(err, pack.ErrFormat) {
				return // a file named as a tree that holds none, met in a walk
			}
			recs = append(recs, trs...)
			return
		}
		rec := verifyOne(p, cfg, stderr)
		rec.Error = trimPath(p, rec.Error)
		recs = append(recs, rec)
	})
	if err != nil {
		return err
	}
	bad := 0
	for _, r := range recs {
		if !r.OK {
			bad++
		}
	}
	if *asJSON {
		if recs == nil {
			recs = []verifyRecord{}
		}
		if err := newJSON(stdout).Encode(recs); err != nil {
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

// inMount says, for info and verify, what path is when it is a bloscfs
// mountpoint or inside one: the mount shows decompressed views, so the
// command is to be run on the source (named: the file a view shows when
// it can be found). It returns "" for any other path.
func inMount(path, cmd string) string {
	abs, err := filepath.Abs(path)
	if err != nil || remote.IsURL(path) {
		return ""
	}
	var m bloscfsMount
	for _, c := range bloscfsMounts() {
		if (abs == c.dir || strings.HasPrefix(abs, c.dir+"/") || c.dir == "/") && len(c.dir) > len(m.dir) {
			m = c
		}
	}
	if m.dir == "" {
		return ""
	}
	if abs == m.dir {
		return fmt.Sprintf("a bloscfs mount of %s, which shows its files decompressed: run 'bloscfs %s %s'", m.source, cmd, m.source)
	}
	rel, _ := filepath.Rel(m.dir, abs)
	if src := sourceOf(m.source, rel); src != "" {
		return fmt.Sprintf("the decompressed view of %s (bloscfs mount at %s): run 'bloscfs %s %s'", src, m.dir, cmd, src)
	}
	dir := m.source + "/" + filepath.Dir(rel)
	if filepath.Dir(rel) == "." {
		dir = m.source
	}
	return fmt.Sprintf("in the bloscfs mount at %s, which shows the files of %s decompressed: run 'bloscfs %s' on the file there", m.dir, dir, cmd)
}

// sourceOf returns the file of a local mount's source that the view
// name rel shows: rel itself, or a container whose plain name is rel's.
// It returns "" when the source is not a local directory (a bucket, or
// an fsname=) or holds no such file.
func sourceOf(source, rel string) string {
	dir := filepath.Join(source, filepath.Dir(rel))
	if !filepath.IsAbs(source) {
		return ""
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	base := filepath.Base(rel)
	for _, e := range entries {
		if plain, ok := all.PlainName(e.Name()); ok && plain == base {
			return filepath.Join(dir, e.Name())
		}
	}
	for _, e := range entries {
		if e.Name() == base {
			return filepath.Join(dir, base)
		}
	}
	return ""
}
