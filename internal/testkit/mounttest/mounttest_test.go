package mounttest

import "testing"

// TestServesArgs: the command lines that serve a mount are those of
// `bloscfs mount -f ... DIR`, whatever the binary's name around
// "bloscfs" (the -race build, the test's stuck daemon), and no others.
func TestServesArgs(t *testing.T) {
	const dir = "/tmp/x/mnt"
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/local/bin/bloscfs", "mount", "-f", "--log", "/l", "/src", dir}, true},
		{[]string{"/tmp/b/bloscfs-race", "mount", "-f=true", "/src", dir}, true},
		{[]string{"bloscfs", "mount", "--log", "/l", "/src", dir}, false},        // the parent of a daemon
		{[]string{"bloscfs", "mount", "-f", "/src", dir + "2"}, false},           // another mountpoint
		{[]string{"/usr/bin/rclone", "mount", "-f", "remote:", dir}, false},      // another server
		{[]string{"bloscfs", "unmount", "-f", "x", dir}, false},                  // no mount
		{[]string{"strace", "-f", "bloscfs", "mount", "-f", "/src", dir}, false}, // its tracer
		{nil, false},
	} {
		if got := servesArgs(tc.args, dir); got != tc.want {
			t.Errorf("servesArgs(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
