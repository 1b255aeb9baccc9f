package main

import (
	"errors"
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
	if len(pos) < 1 || len(pos) > 3 {
		return fmt.Errorf("%w: unpack IN [OUT|-], or unpack STORE KEY [OUT|-]", errUsage)
	}
	in, out := pos[0], ""
	var v *all.View
	if _, _, ok := treeArg(in); ok {
		// A file of a tree: IN inside it, or STORE and KEY.
		var name string
		var done func()
		v, name, done, err = openTreeFile(in, "", cfg)
		args := pos[1:]
		if errors.Is(err, errTreeDir) && len(pos) > 1 {
			v, name, done, err = openTreeFile(in, pos[1], cfg)
			args = pos[2:]
		}
		if err != nil {
			return err
		}
		defer done()
		if len(args) > 1 {
			return fmt.Errorf("%w: unpack IN [OUT|-], or unpack STORE KEY [OUT|-]", errUsage)
		}
		if len(args) == 1 {
			out = args[0]
		} else if remote.IsURL(in) {
			out = name
		} else {
			src, _, _ := treeArg(in)
			out = filepath.Join(filepath.Dir(src), name)
		}
	} else {
		if len(pos) > 2 {
			return fmt.Errorf("%w: unpack IN [OUT|-] (a STORE KEY names a file of a store)", errUsage)
		}
		if len(pos) > 1 {
			out = pos[1]
		}
		// Whole chunks are read once each: no cache, blocks decode in
		// place. A .b2nd's C-order view revisits blocks and needs one.
		v, err = openView(in, cfg, pack.NoCache{})
		if err == nil && v.NPY {
			v.Close()
			v, err = openView(in, cfg, newUnpackCache())
		}
		if err != nil {
			return err
		}
		defer v.Close()
	}
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
