//go:build tributary_faults

package tributary

import (
	"sync/atomic"

	"github.com/f91dcac0/tributary/internal/faults"
)

// runFaultNames is Run's fault table (internal/faults), indexed by
// runFault.
var runFaultNames = [runFaultCount]string{
	faults.None,
	"apply-abandoned",
	"abandon-settling",
	"apply-closed",
}

var runFaultTable = faults.Table(runFaultNames[:])

// String returns the fault's name.
func (f runFault) String() string { return runFaultTable.Name(int(f)) }

// runFaults holds the switched-on runFaults, one bit each, for every Run
// of the process: the state cases build their consumers themselves.
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

// runHooks is empty: the faults are the process's (runFaults).
type runHooks struct{}

// abandons is runFaultAbandonSettling: wait abandons a worker that is
// settling a record too.
func (runHooks) abandons(running bool) bool {
	return running || runFaultOn(runFaultAbandonSettling)
}

// handedBack is runFaultApplyAbandoned: the worker takes the record back
// even after wait abandoned it.
func (runHooks) handedBack(ok bool, state *atomic.Int32) bool {
	if runFaultOn(runFaultApplyAbandoned) {
		state.Store(runIdle)
		return true
	}
	return ok
}

// applies is runFaultApplyClosed, and runFaultApplyAbandoned: the result
// is applied although the consumer was closed while the handler ran.
func (runHooks) applies(notClosed bool) bool {
	return notClosed || runFaultOn(runFaultApplyClosed) || runFaultOn(runFaultApplyAbandoned)
}
