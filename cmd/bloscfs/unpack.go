package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/remote"
)

// unpackCache holds decoded blocks while unpacking; a .b2nd's C-order
// view revisits blocks, so it needs room for a slab of chunks.
const unpackCache = 256 << 20

// defaultUnpackName drops the container suffix; a .b2nd becomes .npy.
func defaultUnpackName(in string) string {
	in = strings.TrimRight(in, "/")
	if name, ok := all.PlainName(filepath.Base(in)); ok {
		return filepath.Join(filepath.Dir(in), name)
	}
	return in + ".out"
}

func cmdUnpack(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("unpack", stdout)
	force := fs.BoolP("force", "f", false, "overwrite OUT")
	quiet := fs.BoolP("quiet", "q", false, "print no summary")
	rf := addRemoteFlagsFor(fs, remoteRead)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	cfg, err := rf.config()
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return fmt.Errorf("%w: unpack IN [OUT|-]", errUsage)
	}
	in, out := pos[0], ""
	if len(pos) > 1 {
		out = pos[1]
	}
	// Whole chunks are read once each: no cache, blocks decode in place.
	// A .b2nd's C-order view revisits blocks and needs one.
	v, err := openView(in, cfg, pack.NoCache{})
	if err == nil && v.NPY {
		v.Close()
		v, err = openView(in, cfg, newUnpackCache())
	}
	if err != nil {
		return err
	}
	defer v.Close()
	start := time.Now()
	if out == "-" {
		pb := newBar(stderr, v.Size, "unpack "+filepath.Base(in))
		if _, err := v.WriteToProgress(stdout, pb.Add); err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		pb.Finish()
		return nil
	}
	if out == "" {
		out = defaultUnpackName(in)
		if remote.IsURL(in) {
			out = remoteUnpackName(in)
		}
	}
	perm := os.FileMode(0o644)
	if st, err := os.Stat(in); err == nil {
		perm = st.Mode().Perm() &^ 0o111 // a sparse frame directory's x bits
	}
	dst, err := createAtomic(out, *force, perm)
	if err != nil {
		return err
	}
	defer dst.Abort()
	pb := newBar(stderr, v.Size, "unpack "+filepath.Base(in))
	if _, err := v.WriteToProgress(dst, pb.Add); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	pb.Finish()
	if err := dst.Commit(); err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	if *quiet {
		return nil
	}
	stored := int64(0)
	if st, err := os.Stat(in); err == nil && !st.IsDir() {
		stored = st.Size()
	} else {
		stored = v.Container.Info().StoredSize
	}
	return printSummary(stderr, "unpacked", in, out, v.Size, stored, start)
}
