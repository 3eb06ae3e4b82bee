//go:build !tributary_faults

package ringlog

// faultOn is the constant false in a normal build, so every fault branch
// is dead code that the compiler removes.
func faultOn(fault) bool { return false }

// faultYield is never reached in a normal build.
func faultYield() {}
