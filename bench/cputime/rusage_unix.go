//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// processCPU returns the user + system CPU time of the whole process, every
// thread included, from getrusage(RUSAGE_SELF).
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
