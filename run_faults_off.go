//go:build !tributary_faults

package tributary

// runFaultOn is the constant false in a normal build.
func runFaultOn(runFault) bool { return false }
