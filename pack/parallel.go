package pack

import "runtime"

// parallelism is how many blocks one ReadAt decodes at once.
func parallelism() int { return max(runtime.GOMAXPROCS(0), 1) }
