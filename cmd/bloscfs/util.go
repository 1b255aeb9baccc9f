package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// parseSize reads sizes such as 1048576, 512KiB, 4MiB, 1GiB, 64K, 1M.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q (use e.g. 1048576, 512KiB, 4MiB, 1GiB)", s)
	}
	return n * mult, nil
}

// bar is a byte progress bar on stderr, shown only when stderr is a
// terminal; the zero value (nil) shows nothing.
type bar struct{ pb *progressbar.ProgressBar }

// newBar returns a bar for total bytes.
func newBar(stderr io.Writer, total int64, what string) *bar {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &bar{progressbar.DefaultBytes(total, what)}
}

// Add advances the bar by n bytes.
func (b *bar) Add(n int64) {
	if b != nil {
		b.pb.Add64(n)
	}
}

// Finish completes the bar.
func (b *bar) Finish() {
	if b != nil {
		b.pb.Finish()
	}
}

// atomicFile writes to a temp file beside path and renames it over path
// on Commit, so that an interrupted command leaves no partial output.
type atomicFile struct {
	*os.File
	path    string
	done    bool
	inPlace bool // a device or pipe: no temp file
}

// createAtomic starts writing path, which gets the permission bits perm
// (as gzip gives its output the input's); without force an existing path
// is an error. An existing device or pipe (/dev/null, a FIFO) is written
// in place: renaming over it would replace the device.
func createAtomic(path string, force bool, perm os.FileMode) (*atomicFile, error) {
	if st, err := os.Stat(path); err == nil {
		switch {
		case st.Mode()&(os.ModeDevice|os.ModeCharDevice|os.ModeNamedPipe) != 0:
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return nil, err
			}
			return &atomicFile{File: f, path: path, inPlace: true}, nil
		case st.IsDir():
			return nil, fmt.Errorf("%s: is a directory", path)
		case !force:
			return nil, fmt.Errorf("%s: already exists (use -f to overwrite)", path)
		}
	}
	interrupts.Do(removeOnInterrupt)
	tempMu.Lock() // a signal now waits until the name is recorded
	defer tempMu.Unlock()
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(perm.Perm()); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	temps[f.Name()] = true
	return &atomicFile{File: f, path: path}, nil
}

// Temp files being written, removed if the command is interrupted.
var (
	interrupts sync.Once
	tempMu     sync.Mutex
	temps      = map[string]bool{}
)

// removeOnInterrupt makes SIGINT and SIGTERM remove the temp files being
// written and exit with the conventional code (128 + the signal: 130,
// 143), so that an interrupted pack or unpack leaves nothing behind.
func removeOnInterrupt() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		tempMu.Lock() // held until exit: no new temp file
		for name := range temps {
			os.Remove(name)
		}
		os.Exit(128 + int(sig.(syscall.Signal)))
	}()
}

// forget drops a temp file from the interrupt list.
func forget(name string) {
	tempMu.Lock()
	delete(temps, name)
	tempMu.Unlock()
}

// Commit syncs, closes and renames the file into place.
func (a *atomicFile) Commit() error {
	if a.inPlace {
		a.done = true
		return a.File.Close()
	}
	if err := a.Sync(); err != nil {
		a.Abort()
		return err
	}
	if err := a.File.Close(); err != nil {
		os.Remove(a.Name())
		forget(a.Name())
		return err
	}
	a.done = true
	tempMu.Lock() // not interrupted between the rename and forgetting the name
	defer tempMu.Unlock()
	delete(temps, a.Name())
	if err := os.Rename(a.Name(), a.path); err != nil {
		os.Remove(a.Name())
		return err
	}
	return nil
}

// Abort removes the temp file (a no-op after Commit).
func (a *atomicFile) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.File.Close()
	if !a.inPlace {
		os.Remove(a.Name())
		forget(a.Name())
	}
}

// followArg resolves a symlink named on the command line: the user chose
// it. Containers are otherwise opened without following symlinks.
func followArg(p string) string {
	if st, err := os.Lstat(p); err == nil && st.Mode()&os.ModeSymlink != 0 {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
	}
	return p
}
