package main

import "log"

// prefixMount makes every line of a mount's logger name the mountpoint
// after the time and the process, so that a user finds their mount's
// lines in a log shared by every mount (syslog, or
// /var/log/bloscfs/bloscfs.log for root).
func prefixMount(logger *log.Logger, mnt string) {
	logger.SetFlags(logger.Flags() | log.Lmsgprefix)
	logger.SetPrefix(logger.Prefix() + mnt + ": ")
}
