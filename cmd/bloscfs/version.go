package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/bloscfs/bloscfs/blosc"
	"github.com/bloscfs/bloscfs/shuffle"
	"golang.org/x/sys/cpu"
)

// version is set for release builds:
//
//	go build -ldflags "-X main.version=v1.2.0" ./cmd/bloscfs
//
// Without it, the version comes from the build information (a module
// version, or the VCS revision).
var version = ""

// ourVersion returns bloscfs's version.
func ourVersion(bi *debug.BuildInfo) string {
	if version != "" {
		return version
	}
	if bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	if rev != "" {
		return "devel-" + rev[:min(12, len(rev))] + modified
	}
	return "devel"
}

// depVersion returns the version of a module the binary was built with.
func depVersion(bi *debug.BuildInfo, path string) string {
	if bi != nil {
		for _, d := range bi.Deps {
			if d.Path == path {
				if d.Replace != nil {
					return d.Replace.Version + " (replaced)"
				}
				return d.Version
			}
		}
	}
	return "unknown"
}

// cpuFeatures lists the CPU features the shuffle kernels can use.
func cpuFeatures() string {
	var have []string
	switch runtime.GOARCH {
	case "amd64":
		if cpu.X86.HasAVX2 {
			have = append(have, "AVX2")
		}
		if cpu.X86.HasSSE2 {
			have = append(have, "SSE2")
		}
	}
	if len(have) == 0 {
		return "none used"
	}
	return strings.Join(have, " ")
}

func cmdVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", stdout)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: version takes no operands", errUsage)
	}
	bi, _ := debug.ReadBuildInfo()
	kernels := map[string]string{"avx2": "AVX2", "sse2": "SSE2", "portable": "portable Go"}[shuffle.Kernels()]
	fmt.Fprintf(stdout, "bloscfs %s\n", ourVersion(bi))
	fmt.Fprintf(stdout, "go:       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(stdout, "go-fuse:  %s\n", depVersion(bi, "github.com/hanwen/go-fuse/v2"))
	fmt.Fprintf(stdout, "codecs:   blosc, blosclz: bloscfs's own; zstd, zlib, snappy: klauspost/compress %s; lz4, lz4hc: pierrec/lz4 %s\n",
		depVersion(bi, "github.com/klauspost/compress"), depVersion(bi, "github.com/pierrec/lz4/v4"))
	fmt.Fprintf(stdout, "zstd:     decoding with %s\n", blosc.ZstdDecoder())
	fmt.Fprintf(stdout, "shuffle:  %s kernels (CPU: %s)\n", kernels, cpuFeatures())
	return nil
}
