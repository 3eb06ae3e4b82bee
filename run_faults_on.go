//go:build tributary_faults

package tributary

import "sync/atomic"

// runFaults holds the switched-on runFaults, one bit each.
var runFaults atomic.Uint32

// runFaultOn reports whether f is switched on.
func runFaultOn(f runFault) bool { return runFaults.Load()&(1<<f) != 0 }

// setRunFault switches f on (or off); tests only.
func setRunFault(f runFault, on bool) {
	for {
		old := runFaults.Load()
		v := old &^ (1 << f)
		if on {
			v |= 1 << f
		}
		if runFaults.CompareAndSwap(old, v) {
			return
		}
	}
}
