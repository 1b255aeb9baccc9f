// Command bloscfs works with Blosc-compressed files: Bloscpack (.blp) and
// Blosc2 frames (.b2frame, sparse frame directories, .b2nd arrays) and bare
// chunks (.blosc).
//
//	bloscfs mount  [flags] SOURCE MNT  show SOURCE decompressed at MNT
//	bloscfs unmount MNT
//	bloscfs pack   [flags] IN [OUT]    compress a plain file
//	bloscfs unpack [flags] IN [OUT|-]  decompress (a .b2nd becomes .npy)
//	bloscfs info   [--json] FILE…      how files are stored
//	bloscfs verify [--json] PATH…      decode everything, check checksums
//
// Exit codes: 0 success; 1 a file could not be processed, or verify found
// a problem; 2 the command line is wrong.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	_ "github.com/bloscfs/bloscfs/pack/all"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `usage:
  bloscfs mount  [-f] [-o ro,allow_other,...] [--cache-size 512MiB] [--read-only] [--log FILE] SOURCE MOUNTPOINT
  bloscfs unmount [-l] MOUNTPOINT
  bloscfs pack   [--format b2frame|blp] [--codec C] [--clevel N] [--filter F] [--typesize N] [--chunk-size S] [--checksum K] [-f] IN [OUT]
  bloscfs unpack [-f] IN [OUT|-]
  bloscfs info   [--json] FILE...
  bloscfs verify [--json] PATH...
Run 'bloscfs COMMAND -h' for a command's flags. Exit codes: 0 ok, 1 failure, 2 usage.
`

// errUsage marks command-line mistakes (exit code 2).
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmds := map[string]func([]string, io.Writer, io.Writer) error{
		"pack": packRemote, "unpack": cmdUnpack, "info": cmdInfo, "verify": cmdVerify,
		"mount": cmdMount, "unmount": cmdUnmount,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		fmt.Fprintf(stderr, "bloscfs: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
	err := cmd(args[1:], stdout, stderr)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "bloscfs %s: %v\n", args[0], err)
		return exitUsage
	case errors.Is(err, errReported):
		return exitFail
	default:
		fmt.Fprintf(stderr, "bloscfs %s: %v\n", args[0], oneLine(err))
		return exitFail
	}
}

// errReported means the command already printed its problems.
var errReported = errors.New("problems reported")

// oneLine keeps an error message on one line.
func oneLine(err error) string {
	b := []byte(err.Error())
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}

// newFlags returns a FlagSet for a command that reports to stderr.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("bloscfs "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses and turns flag errors into usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
