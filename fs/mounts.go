package fs

import (
	"bufio"
	"fmt"
	"log"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// IsMountpoint reports whether path is the mountpoint of a mount, from
// /proc/self/mountinfo.
func IsMountpoint(path string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && UnescapeMount(fields[4]) == path {
			return true, nil
		}
	}
	return false, sc.Err()
}

// UnescapeMount undoes the octal escapes of /proc/mounts and
// /proc/self/mountinfo (\040 for a space, …).
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// raiseReadahead lets the kernel send 1 MiB READs: MaxReadAhead cannot go
// beyond the bdi's read_ahead_kb (128 by default), which only root may
// raise. Failure is quiet: the mount works, a little slower.
func raiseReadahead(mnt string, logger *log.Logger) {
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		return
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	if err := os.WriteFile(path, []byte("1024"), 0); err != nil && logger != nil && os.Getuid() == 0 {
		logger.Printf("could not raise %s: %v", path, err)
	}
}
