//go:build !tributary_faults

package tributary

import "sync/atomic"

// runHooks is empty in a normal build, and each of its methods returns its
// first argument, the correct value. Each inlines, so Run compiles as if
// the seam were not there. run_faults.go says where each seam is and what
// its broken variant does.
type runHooks struct{}

// abandons returns running: wait abandons the worker only while the
// handler runs.
func (runHooks) abandons(running bool) bool { return running }

// handedBack returns ok: the worker takes the record back only when it
// moved state from runHandling to runIdle.
func (runHooks) handedBack(ok bool, _ *atomic.Int32) bool { return ok }

// applies returns notClosed: the handler's result is applied only when the
// consumer was not closed while it ran.
func (runHooks) applies(notClosed bool) bool { return notClosed }
