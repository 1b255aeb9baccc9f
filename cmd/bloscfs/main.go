// Command bloscfs works with Blosc-compressed files: Bloscpack (.blp) and
// Blosc2 frames (.b2frame, sparse frame directories, .b2nd arrays) and bare
// chunks (.blosc).
//
//	bloscfs mount  [flags] SOURCE MNT  show SOURCE decompressed at MNT
//	bloscfs SOURCE MNT [-o OPTIONS]    the same, as mount.fuse3 and fstab run it
//	bloscfs unmount MNT
//	bloscfs stats [--json] MNT         counters of a mount
//	bloscfs pack   [flags] IN [OUT]    compress a plain file
//	bloscfs unpack [flags] IN [OUT|-]  decompress (a .b2nd becomes .npy)
//	bloscfs info   [--json] PATH…      how files are stored
//	bloscfs verify [--json] PATH…      decode everything, check checksums
//	bloscfs version                    versions and CPU features
//
// Exit codes: 0 success; 1 a file could not be processed, or verify found
// a problem; 2 the command line is wrong.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	_ "github.com/bloscfs/bloscfs/pack/all"
	"github.com/spf13/pflag"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// command is one subcommand: its synopsis and summary for the help, and
// what runs it.
type command struct {
	name, synopsis, summary string
	run                     func([]string, io.Writer, io.Writer) error
}

// commands lists the subcommands in the order the help shows them.
var commands []command

func init() {
	commands = []command{
		{"mount", "[flags] SOURCE MOUNTPOINT", mountHelp, cmdMount},
		{"unmount", "[-l] MOUNTPOINT", unmountHelp, cmdUnmount},
		{"stats", "[--json] MOUNTPOINT", "Show the counters of a mount: cache hits, misses, evictions, bytes held,\ndecoded bytes and decode time per codec, open files, read-ahead hits.", cmdStats},
		{"pack", "[flags] IN|- [OUT]", packHelp, cmdPack},
		{"unpack", "[flags] IN [OUT|-]  or  STORE KEY [OUT|-]", "Decompress IN on all cores to OUT (default: IN without its suffix; a .b2nd\nbecomes .npy), or to standard output with -. IN may be a path inside a\nstore held in one file or directory (a zipped Zarr store, a python-blosc2\n.b2z, .b2e or .b2d), as the mount shows it; or give the STORE and the KEY\nof one of its files.", cmdUnpack},
		{"info", "[--json] PATH...", "Show how files are stored; a directory is walked (every file with a\ncontainer suffix or magic, every sparse frame directory, every store held\nin one file or directory: the store and each of its files).", cmdInfo},
		{"verify", "[--json] PATH...", "Decode everything in files, directory trees and stores, checking every\nchecksum. Run it on the source of a mount, not on the mount.", cmdVerify},
		{"version", "", "Show the versions of bloscfs, Go and the libraries, and the CPU features\nthe shuffle kernels use.", cmdVersion},
		{"help", "[COMMAND]", "Show the help of a command.", cmdHelp},
	}
}

// findCommand returns the subcommand called name.
func findCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// usage is the general help: every command with every option, and the
// formats.
const usage = `usage:
  bloscfs mount  [-f|--foreground] [-o|--options OPTIONS] [--cache-size 512MiB]
                 [--read-ahead 0] [--read-only] [--log FILE|syslog|stderr]
                 [-d|--debug]
                 [--new-format b2frame|blp|none] [--codec C] [--clevel N]
                 [--filter F] [--typesize N] [--chunk-size S] SOURCE MOUNTPOINT
  bloscfs SOURCE MOUNTPOINT [-o OPTIONS]   (mount, as mount.fuse3 and fstab run it)
  bloscfs unmount [-l|--lazy] MOUNTPOINT
  bloscfs stats  [--json] MOUNTPOINT
  bloscfs pack   [--format b2frame|blp|b2nd] [--codec C] [--clevel N] [--filter F]
                 [--typesize N] [--chunk-size S] [--block-size S] [--checksum K]
                 [--chunkshape A,B,...] [--blockshape A,B,...] [-f|--force]
                 [-q|--quiet] IN|- [OUT]
  bloscfs unpack [-f|--force] [-q|--quiet] IN [OUT|-]
  bloscfs unpack [-f|--force] [-q|--quiet] STORE KEY [OUT|-]
  bloscfs info   [--json] PATH...
  bloscfs verify [--json] PATH...
  bloscfs version   (or --version)
  bloscfs help [COMMAND]   (or COMMAND --help)

Remote archives: SOURCE of mount, PATH of info and verify, IN of unpack and
OUT of pack may be s3://BUCKET[/KEY] in S3-compatible object storage (a
remote mount is read-only). Credentials and region come from the usual
AWS_* variables and ~/.aws files. With s3:// locations, every command takes
                 [--endpoint URL] [--s3-path-style true|false] [--anonymous]
                 [--region R] [--request-timeout 30s]
unpack and verify also [--remote-cache-size 256MiB] [--cache-dir DIR]
                 [--cache-dir-size 4GiB], and mount these and [--dir-cache 60s].

Formats read: Bloscpack (.blp), Blosc2 frames (.b2frame, .b2f, .b2), sparse
frame directories, .b2nd arrays (shown as .npy) and bare chunks (.blosc).
Formats written: b2frame, blp, b2nd (from a .npy). Codecs: blosclz, lz4,
lz4hc, zlib, zstd (and snappy to read). Filters: shuffle, bitshuffle, none,
delta,shuffle, shuffle,bytedelta, truncprec:N,shuffle.
Sizes accept KiB, MiB, GiB (and K, M, G). Flags may come before or after
the operands. Run 'bloscfs help COMMAND' for a command's flags.
Exit codes: 0 ok, 1 failure, 2 wrong command line.
`

// errUsage marks command-line mistakes (exit code 2).
var errUsage = errors.New("usage")

func main() {
	if dir := os.Getenv(watchEnv); dir != "" {
		os.Exit(runWatcher(dir))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	case "-V", "--version":
		name = "version"
	}
	cmd, ok := findCommand(name)
	if ok {
		args = args[1:]
	} else if looksLikeMount(args) {
		// mount.fuse3 (and so fstab and mount -t fuse.bloscfs) runs
		// `bloscfs SOURCE MOUNTPOINT -o OPTIONS`, as for sshfs.
		cmd, name = command{name: "mount", run: cmdMount}, "mount"
	} else {
		fmt.Fprintf(stderr, "bloscfs: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
	err := cmd.run(args, stdout, stderr)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, pflag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "bloscfs %s: %v\n", name, err)
		if name != "help" {
			fmt.Fprintf(stderr, "Run 'bloscfs help %s' for its flags.\n", name)
		}
		return exitUsage
	case errors.Is(err, errReported):
		return exitFail
	default:
		fmt.Fprintf(stderr, "bloscfs %s: %v\n", name, oneLine(err))
		return exitFail
	}
}

// looksLikeMount tells whether args that do not start with a command are
// a mount: a first argument that names a directory, or is a path, or an
// option (mount.fuse3 may put -o first).
func looksLikeMount(args []string) bool {
	a := args[0]
	if strings.HasPrefix(a, "-") {
		return len(args) > 1
	}
	if strings.Contains(a, "/") {
		return true
	}
	st, err := os.Stat(a)
	return err == nil && st.IsDir()
}

// cmdHelp shows the general help or a command's.
func cmdHelp(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return nil
	}
	c, ok := findCommand(args[0])
	if !ok {
		return fmt.Errorf("%w: no command %q (%s)", errUsage, args[0], commandNames())
	}
	if c.name == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	return c.run([]string{"--help"}, stdout, stderr)
}

// commandNames lists the commands, for messages.
func commandNames() string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
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
	return strings.TrimSpace(string(b))
}

// newFlags returns the flag set of a command. --help and -h print the
// command's help on stdout; parse errors are returned, not printed.
func newFlags(name string, stdout io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("bloscfs "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.Usage = func() {
		c, _ := findCommand(name)
		fmt.Fprintf(stdout, "usage: bloscfs %s %s\n\n%s\n", name, c.synopsis, c.summary)
		if fs.HasFlags() {
			fmt.Fprintf(stdout, "\nFlags:\n%s", fs.FlagUsages())
		}
	}
	return fs
}

// parseFlags parses flags, which may come before, between or after the
// operands, and returns the operands; flag errors become usage errors
// that name the flag, the value and what it takes.
func parseFlags(fs *pflag.FlagSet, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, err
		}
		var bad *pflag.InvalidValueError
		if errors.As(err, &bad) {
			takes := valueKind(bad.GetFlag().Value.Type())
			if takes == "" { // a value of ours says it itself
				takes = errors.Unwrap(bad).Error()
			}
			return nil, badFlag(bad.GetFlag().Name, bad.GetValue(), takes)
		}
		return nil, usageError(err.Error())
	}
	return fs.Args(), nil
}

// badFlag is the usage error of a flag given a value it does not take:
// the flag, the value, and in plain words what it takes.
func badFlag(flag, value, takes string) error {
	return usageError(fmt.Sprintf("--%s %q: %s", flag, value, takes))
}

// usageError is a command-line mistake told in words of its own: it is
// an errUsage (exit code 2) without the "usage:" of a synopsis.
type usageError string

func (e usageError) Error() string { return string(e) }

// Is makes a usageError an errUsage.
func (e usageError) Is(target error) bool { return target == errUsage }

// valueKind says what a flag of a pflag value type takes ("" for a
// value type of ours).
func valueKind(typ string) string {
	switch typ {
	case "bool":
		return "takes true or false"
	case "int", "int64", "uint", "uint64":
		return "not a whole number"
	case "duration":
		return "not a duration (e.g. 500ms, 30s, 2m, 1h)"
	}
	return ""
}

// sizeHint says what a size flag takes.
const sizeHint = "a size such as 1048576, 512KiB, 4MiB or 1GiB"
