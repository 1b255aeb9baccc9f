// Package fs will hold the go-fuse node tree of the mount: the loopback of
// the source directory, name mapping, and nodes for compressed files. Not
// built yet: see the mount issue.
package fs
