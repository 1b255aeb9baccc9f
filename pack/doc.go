// Package pack will hold the containers: Bloscpack (.blp) and Blosc2
// frames (contiguous, sparse, b2nd), each an io.ReaderAt over the plain
// bytes, with writers that stream new containers. Not built yet: see the
// containers issue.
package pack
