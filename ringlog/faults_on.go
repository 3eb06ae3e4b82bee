//go:build tributary_faults

package ringlog

import (
	"runtime"
	"sync/atomic"
)

// Fault is one deliberate bug of the paged log that InjectFault switches
// on, for every Log of the process. It exists only in builds with the
// tributary_faults build tag; never use such a build for anything but
// tests.
type Fault uint8

// The faults.
const (
	// FaultNone is the correct log.
	FaultNone = Fault(faultNone)
	// FaultGrowPublishesEarly: a grown directory is published before the
	// pages in use are copied into it (and the writer yields in between),
	// so a concurrent Read can find its page missing.
	FaultGrowPublishesEarly = Fault(faultGrowPublishesEarly)
	// FaultTrimFreesLivePage: TrimTo gives up the page holding the new log
	// start as well, although some of its entries are still retained.
	FaultTrimFreesLivePage = Fault(faultTrimFreesLivePage)
)

// Faults returns every fault but FaultNone.
func Faults() []Fault {
	var out []Fault
	for f := faultNone + 1; f < faultCount; f++ {
		out = append(out, Fault(f))
	}
	return out
}

// String names the fault.
func (f Fault) String() string {
	return [...]string{"none", "grow-publishes-early", "trim-frees-live-page"}[f]
}

var injected atomic.Uint32

// InjectFault switches f on for every Log (FaultNone: off). Call it while
// no Log is in use.
func InjectFault(f Fault) { injected.Store(uint32(f)) }

func faultOn(f fault) bool { return fault(injected.Load()) == f }

// faultYield widens the window of FaultGrowPublishesEarly.
func faultYield() { runtime.Gosched() }
