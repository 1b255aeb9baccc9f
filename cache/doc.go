// Package cache will hold the byte-bounded LRU of decoded blocks with
// single-flight loading that the mount reads through. Not built yet: see
// the mount issue.
package cache
