package fs

// Probes of objects and sparse frames in a bucket, once per version
// (ETag): from an object's first bytes where its header says enough.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/all"
	"github.com/bloscfs/bloscfs/pack/frame"
	"github.com/bloscfs/bloscfs/remote"
)

// probeHead is how many leading bytes of an object a probe fetches, in
// one ranged GET: a container's header lies there (a frame's, metalayers
// included, a Bloscpack file's, a chunk's). An object of at most twice
// that is fetched whole by the GET instead (as a local probe reads a
// small file whole): at most 64 KiB more, where the open would cost a
// GET of its own.
const probeHead = 64 << 10

// probe probes an object version once and records whether it is a
// readable container, and the size of its view. A failure is logged
// once: the object is then shown raw under its own name. A failure to
// reach the object is not recorded: it is probed again next time.
func (r *RemoteFS) probe(info remote.ObjectInfo) *probe {
	if treeNamed(path.Base(info.Key), false) {
		return r.probeTree(info)
	}
	key := info.Key + "\x00" + info.ETag
	if p, ok := r.probes.Get(key); ok {
		return p
	}
	p, failed, err := r.probeObject(info)
	if err != nil {
		if failed && !errors.Is(err, pack.ErrUnknownFormat) {
			// The object is gone, changed or out of reach: try again
			// next time rather than show it raw for good.
			r.f.warnOnce("%s: %v", r.store.Name(info.Key), err)
			return &probe{}
		}
		r.f.warnOnce("%s: shown raw: %v", r.store.Name(info.Key), err)
		p = &probe{}
	}
	r.probes.Add(key, p)
	return p
}

// probeObject reads what a listing needs of an object: its first
// probeHead bytes (all of it, up to twice that), in one GET (If-Match
// the listed ETag), which stay in the range cache for an open of the
// same version. An object fetched whole is then parsed whole, from those
// bytes; a larger one from its header alone (pack.OpenHead), and its
// index, trailer and chunks are left to the first open, or to the first
// GETXATTR that needs them (see fullProbe). A header longer than probeHead costs one more GET of the
// rest of it; a container whose header does not tell its size (a
// Bloscpack file without chunk sizes) is opened as for a read. failed
// reports an error of the store rather than of the object's content.
func (r *RemoteFS) probeObject(info remote.ObjectInfo) (p *probe, failed bool, err error) {
	o := r.store.OpenInfo(info)
	o.Opened() // the GETs fetch what is asked, no more
	n := info.Size
	if n > 2*probeHead {
		n = probeHead
	}
	head := make([]byte, n)
	if err := o.ReadExact(head, 0); err != nil {
		return nil, true, err
	}
	if int64(len(head)) == info.Size {
		v, err := all.OpenViewReader(bytes.NewReader(head), info.Size, o.Name(), pack.NoCache{})
		if err != nil {
			return nil, false, err
		}
		return probeOf(v), false, nil
	}
	for {
		h, err := pack.OpenHead(head, info.Size, o.Name())
		var short *pack.HeadShortError
		switch {
		case err == nil:
			return &probe{ok: true, size: h.Size, npy: h.NPY, info: pack.Info{Format: h.Format, StoredSize: info.Size}, head: true}, false, nil
		case errors.As(err, &short) && short.N > int64(len(head)) && short.N <= min(info.Size, pack.MaxHead):
			more := make([]byte, short.N)
			copy(more, head)
			if err := o.ReadExact(more[len(head):], int64(len(head))); err != nil {
				return nil, true, err
			}
			head = more
		case errors.Is(err, pack.ErrNoHead):
			return r.probeOpen(info)
		default:
			return nil, false, err
		}
	}
}

// probeOpen probes an object by opening it as a read does: its header,
// index and trailer (for an object of at most remote.SmallObject bytes,
// all of it) in as few GETs as the format allows.
func (r *RemoteFS) probeOpen(info remote.ObjectInfo) (*probe, bool, error) {
	o := r.store.OpenInfo(info)
	v, err := all.OpenViewReader(o, o.Size, o.Name(), pack.NoCache{})
	if err != nil {
		return nil, o.Failed(), err
	}
	return probeOf(v), false, nil
}

// fullProbe returns the probe of the opened object version info, for
// what a probe of its header alone (p.head) does not know: its codec,
// chunks and the other user.bloscfs.* attributes. Any other probe is
// returned as it is.
func (r *RemoteFS) fullProbe(info remote.ObjectInfo, p *probe) (*probe, error) {
	if p == nil || !p.head {
		return p, nil
	}
	full, failed, err := r.probeOpen(info)
	if err != nil {
		if failed {
			r.f.warnOnce("%s: %v", r.store.Name(info.Key), err)
		} else {
			// Shown raw from the next lookup on, as an open that
			// finds the same records it.
			r.f.warnOnce("%s: its header parses but the container does not: %v", r.store.Name(info.Key), err)
			r.probes.Add(info.Key+"\x00"+info.ETag, &probe{})
		}
		return p, err
	}
	r.probes.Add(info.Key+"\x00"+info.ETag, full)
	return full, nil
}

// maxSparseIndex bounds the chunks.b2frame read into memory.
const maxSparseIndex = 64 << 20

// openSparse opens the sparse frame under prefix: its index object is
// read whole, its chunk objects as the reads need them (by the ETags of
// the listing).
func (r *RemoteFS) openSparse(prefix string, c pack.BlockCache) (*all.View, *remote.Object, error) {
	l, err := r.store.List(context.Background(), prefix)
	if err != nil {
		return nil, nil, err
	}
	info, ok := l.Objects[frame.IndexFile]
	if !ok {
		return nil, nil, fmt.Errorf("%s: no %s: %w", r.store.Name(prefix), frame.IndexFile, pack.ErrUnknownFormat)
	}
	if info.Size > maxSparseIndex {
		return nil, nil, fmt.Errorf("%s: %w: %s of %d bytes", r.store.Name(prefix), pack.ErrUnsupported, frame.IndexFile, info.Size)
	}
	idx := r.store.OpenInfo(info)
	b := make([]byte, info.Size)
	if _, err := idx.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil, idx, err
	}
	idx.Opened()
	chunk := func(id int64) (io.ReaderAt, int64, error) {
		ci, ok := l.Objects[frame.ChunkFileName(id)]
		if !ok {
			return nil, 0, fmt.Errorf("%s%s: %w", r.store.Name(prefix), frame.ChunkFileName(id), remote.ErrNotFound)
		}
		o := r.store.OpenInfo(ci)
		o.Opened()
		return o, ci.Size, nil
	}
	v, err := all.OpenSparseView(b, r.store.Name(strings.TrimSuffix(prefix, "/")), chunk, c)
	return v, idx, err
}

// probeSparse records whether prefix holds a readable sparse frame.
func (r *RemoteFS) probeSparse(prefix string) *probe {
	l, err := r.store.List(context.Background(), prefix)
	if err != nil {
		return &probe{}
	}
	info, ok := l.Objects[frame.IndexFile]
	if !ok {
		return &probe{}
	}
	key := info.Key + "\x00" + info.ETag
	if p, ok := r.probes.Get(key); ok {
		return p
	}
	p := &probe{}
	v, idx, err := r.openSparse(prefix, pack.NoCache{})
	if err != nil {
		if idx != nil && idx.Failed() {
			return p // try again next time
		}
		r.f.warnOnce("%s: shown as a directory: %v", r.store.Name(prefix), err)
	} else {
		p = probeOf(v)
	}
	r.probes.Add(key, p)
	return p
}
