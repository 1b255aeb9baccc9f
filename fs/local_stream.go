package fs

import (
	"fmt"
	"os"
	"runtime"

	"github.com/bloscfs/bloscfs/pack"
	"github.com/bloscfs/bloscfs/pack/frame"
)

// streamer writes a new .b2frame file that is being written from its
// start, in order (cp, shell >, a program saving its output), straight
// into the hidden temp file that will replace it at commit: chunks are
// compressed on all cores while the writes go on, and nothing is staged.
// Anything else (a write elsewhere, a read, a truncation) ends the
// stream: demote moves what it holds into the stage file, and the stage
// carries on as for any other file.
type streamer struct {
	tmp     *tempFile
	w       *frame.Writer
	cs      int
	buf     []byte        // the chunk being filled
	pending []*chunkJob   // chunks compressing or compressed, in order
	free    [][]byte      // chunk buffers to reuse
	sem     chan struct{} // bounds the compressions running
	emitted int64         // plain bytes whose chunks are in w
	err     error         // the first failure: the stream's data is lost
}

// chunkJob is one chunk being compressed.
type chunkJob struct {
	plain []byte
	out   []byte
	err   error
	done  chan struct{}
}

// streamMemory bounds the plain bytes a stream holds in chunks that are
// compressing or waiting to be written (at least one chunk).
const streamMemory = 64 << 20

// maxPending is how many chunks may be pending: two per core, fewer when
// chunks are large.
func (s *streamer) maxPending() int {
	return max(1, min(2*runtime.GOMAXPROCS(0), streamMemory/s.cs))
}

// newStreamer starts a frame of chunk size cs with chunk parameters p in
// tmp.
func newStreamer(tmp *tempFile, p frame.Params) (*streamer, error) {
	w, err := frame.NewWriter(tmp, p)
	if err != nil {
		return nil, err
	}
	return &streamer{tmp: tmp, w: w, cs: p.ChunkSize, sem: make(chan struct{}, runtime.GOMAXPROCS(0))}, nil
}

// size is the plain size written so far.
func (s *streamer) size() int64 {
	n := s.emitted + int64(len(s.buf))
	for _, j := range s.pending {
		n += int64(len(j.plain))
	}
	return n
}

// write appends p.
func (s *streamer) write(p []byte) error {
	if s.err != nil {
		return s.err
	}
	for len(p) > 0 {
		if s.buf == nil {
			if k := len(s.free); k > 0 {
				s.buf, s.free = s.free[k-1][:0], s.free[:k-1]
			} else {
				// A small file gets a small buffer; append grows it.
				s.buf = make([]byte, 0, min(s.cs, max(len(p), 64<<10)))
			}
		}
		k := min(len(p), s.cs-len(s.buf))
		s.buf = append(s.buf, p[:k]...)
		p = p[k:]
		if len(s.buf) == s.cs {
			if err := s.submit(); err != nil {
				return err
			}
		}
	}
	return nil
}

// submit starts compressing the buffered chunk, and adds the chunks that
// are done to the frame; it waits while too many are in memory.
func (s *streamer) submit() error {
	j := &chunkJob{plain: s.buf, done: make(chan struct{})}
	s.buf = nil
	s.sem <- struct{}{}
	go func() {
		j.out, j.err = s.w.Compress(j.plain)
		<-s.sem
		close(j.done)
	}()
	s.pending = append(s.pending, j)
	return s.emit(s.maxPending())
}

// emit adds the compressed chunks to the frame in order, waiting until at
// most keep remain pending.
func (s *streamer) emit(keep int) error {
	for len(s.pending) > 0 {
		j := s.pending[0]
		if len(s.pending) > keep {
			<-j.done
		} else {
			select {
			case <-j.done:
			default:
				return nil
			}
		}
		if j.err == nil {
			j.err = s.w.AddCompressed(j.out, len(j.plain))
		}
		if j.err != nil {
			s.err = j.err
			return j.err
		}
		s.emitted += int64(len(j.plain))
		if cap(j.plain) == s.cs && len(s.free) < s.maxPending() {
			s.free = append(s.free, j.plain[:0])
		}
		s.pending[0] = nil
		s.pending = s.pending[1:]
	}
	return nil
}

// finish adds the last, partial chunk and completes the frame in tmp.
func (s *streamer) finish() error {
	if s.err != nil {
		return s.err
	}
	if len(s.buf) > 0 {
		if err := s.submit(); err != nil {
			return err
		}
	}
	if err := s.emit(0); err != nil {
		return err
	}
	if err := s.w.Close(); err != nil {
		s.err = err
		return err
	}
	return nil
}

// demote ends the stream: it completes the frame, copies its plain bytes
// into the stage file at the same offsets, and removes tmp. It returns
// the plain size moved.
func (s *streamer) demote(stageFile *os.File) (int64, error) {
	defer s.abort()
	size := s.size()
	if err := s.finish(); err != nil {
		return 0, err
	}
	st, err := s.tmp.Stat()
	if err != nil {
		return 0, err
	}
	fr, err := frame.Open(s.tmp.File, st.Size(), s.tmp.Name(), pack.NoCache{})
	if err != nil {
		return 0, err
	}
	if fr.Size() != size {
		return 0, fmt.Errorf("%w: streamed frame holds %d bytes, %d were written", pack.ErrFormat, fr.Size(), size)
	}
	buf := make([]byte, min(int64(s.cs), size))
	for off := int64(0); off < size; off += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-off)]
		if err := readFullAt(fr, b, off); err != nil {
			return 0, err
		}
		if _, err := stageFile.WriteAt(b, off); err != nil {
			return 0, err
		}
	}
	return size, nil
}

// abort drops the stream and its temp file.
func (s *streamer) abort() {
	for _, j := range s.pending {
		<-j.done // no compression outlives the stream
	}
	s.pending = nil
	s.tmp.remove()
}
