// Package integration will hold black-box tests of the built binary on
// real FUSE mounts. Not built yet: see the mount issue.
package integration
