//go:build tributary_faults

package ringlog

import (
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/f91dcac0/tributary/internal/faults"
)

// faultNames is the log's fault table (internal/faults), indexed by fault.
var faultNames = [faultCount]string{
	faults.None,
	"grow-publishes-early",
	"trim-frees-live-page",
}

var faultTable = faults.Table(faultNames[:])

// Faults returns the name of every fault of the paged log but "none", in
// table order, as a new slice owned by the caller. It exists only in
// builds with the tributary_faults build tag; never use such a build for
// anything but tests.
func Faults() []string { return append([]string(nil), faultNames[1:]...) }

// injected is the fault switched on for every Log; faultNone: none.
var injected atomic.Uint32

// InjectFault switches the fault named name on for every Log of the
// process ("none": off), since the log's tests build their logs
// themselves. Call it while no Log is in use. It returns an error for a
// name not in Faults.
func InjectFault(name string) error {
	f, err := faultTable.Parse(name)
	if err != nil {
		return fmt.Errorf("ringlog: %w", err)
	}
	injected.Store(uint32(f))
	return nil
}

func on(f fault) bool { return fault(injected.Load()) == f }

// hooks is empty: the fault is the process's (injected).
type hooks[T any] struct{}

// filling is fault grow-publishes-early: it publishes grown before install
// fills it, and yields, so that a concurrent Read is likely to run then.
func (hooks[T]) filling(dir *atomic.Pointer[directory[T]], grown *directory[T]) {
	if on(faultGrowPublishesEarly) {
		dir.Store(grown)
		runtime.Gosched()
	}
}

// firstKept is fault trim-frees-live-page: TrimTo gives up the page of
// off too, while it still holds retained entries (off < end).
func (hooks[T]) firstKept(last, off, end int64) int64 {
	if on(faultTrimFreesLivePage) && off < end {
		return last + 1
	}
	return last
}
