//go:build !unix

package cputime

import (
	"errors"
	"runtime"
	"time"
)

func processCPU() (time.Duration, error) {
	return 0, errors.New("cputime: getrusage is not available on " + runtime.GOOS)
}
