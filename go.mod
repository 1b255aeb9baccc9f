module github.com/bloscfs/bloscfs

go 1.26.8

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
