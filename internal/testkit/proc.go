package testkit

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcValue reads a "Key: N kB" line of /proc/PID/status (VmHWM, VmRSS)
// or a "key: N" line of /proc/PID/io (rchar, wchar), in bytes; -1 and an
// error when the process or the line is not there.
func ProcValue(pid int, file, key string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return -1, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return -1, fmt.Errorf("/proc/%d/%s: %s: %v", pid, file, key, err)
			}
			if len(f) > 1 && f[1] == "kB" {
				n <<= 10
			}
			return n, nil
		}
	}
	return -1, fmt.Errorf("/proc/%d/%s has no %s", pid, file, key)
}

// ProcCPU returns the CPU time (user and system) that process pid has
// used so far.
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100, nil // USER_HZ
}
