// Command bloscfs mounts a directory and shows every Blosc-compressed file
// in it as the plain bytes it holds. The subcommands are being built; see
// README.md for what works today.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bloscfs: no subcommand is implemented yet; see README.md")
	os.Exit(2)
}
