// Command mkstore writes a python-blosc2 store directory (.b2d) with the
// store writer of the tests (package b2w), for examples/make-examples.sh:
//
//	mkstore [-marker b2tree] [-threshold 8192] DIR ITEM...
//
// Each ITEM is one of
//
//	KEY=FILE             the value KEY is the frame in FILE (a .b2nd or a
//	                     .b2frame written by bloscfs pack): embedded when
//	                     its nbytes are under the threshold, else a file
//	KEY=c2:URLBASE|PATH  a C2Array reference
//	vlmeta:PATH:NAME=JSON  TreeStore vlmeta of the subtree PATH ("" for
//	                     the root): JSON null, a boolean, a number, a
//	                     string or an array of those
//
// in the order python-blosc2 would be asked to store them.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/bloscfs/bloscfs/internal/testkit/b2w"
	"github.com/bloscfs/bloscfs/pack/frame"
)

func main() {
	marker := flag.String("marker", b2w.MarkerTree, "the embed store's marker: b2tree, b2dict, b2embed")
	threshold := flag.Int64("threshold", 1<<13, "values of at least this many bytes (nbytes) are files of their own")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: mkstore [-marker M] [-threshold N] DIR ITEM...")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *marker, *threshold, flag.Args()[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkstore:", err)
		os.Exit(1)
	}
}

func run(dir, marker string, threshold int64, items []string) error {
	d := b2w.NewDictWriter(marker, 1<<13, threshold)
	vls := map[string]*[]b2w.KV{}
	for _, it := range items {
		if rest, ok := strings.CutPrefix(it, "vlmeta:"); ok {
			path, nv, ok := strings.Cut(rest, ":")
			name, js, ok2 := strings.Cut(nv, "=")
			if !ok || !ok2 {
				return fmt.Errorf("%q: want vlmeta:PATH:NAME=JSON", it)
			}
			var v any
			dec := json.NewDecoder(strings.NewReader(js))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				return fmt.Errorf("%q: %w", it, err)
			}
			if vls[path] == nil {
				vls[path] = new([]b2w.KV)
			}
			d.SetVLMeta(path, vls[path], name, plain(v))
			continue
		}
		key, val, ok := strings.Cut(it, "=")
		if !ok || !strings.HasPrefix(key, "/") {
			return fmt.Errorf("%q: want /KEY=FILE or /KEY=c2:URLBASE|PATH", it)
		}
		if ref, ok := strings.CutPrefix(val, "c2:"); ok {
			u, p, _ := strings.Cut(ref, "|")
			d.ES.SetC2(key, u, p)
			continue
		}
		b, err := os.ReadFile(val)
		if err != nil {
			return err
		}
		fr, err := frame.Open(bytes.NewReader(b), int64(len(b)), val, nil)
		if err != nil {
			return err
		}
		nbytes, ext := fr.Size(), ".b2f"
		if a := fr.Array(); a != nil {
			nbytes, ext = a.Len()*int64(a.Itemsize), ".b2nd"
		}
		d.Set(key, b, nbytes, ext)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	d.Write(dir)
	return nil
}

// plain turns what encoding/json decoded into what b2w.Packb packs as
// Python's msgpack would: integers as integers.
func plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = plain(y)
		}
		return out
	}
	return v
}
