package tributary

//lint:file-ignore U1000 the faults are named here for the tributary_faults build (run_faults_on.go).

// Deliberate bugs of Consumer.Run's handler hand-off, for proving that the
// tests of run_state_test.go catch them (run_faults_test.go). Each is the
// broken variant of one seam, a method of the runner's hooks that
// consumer.go calls where the step is:
//
//   - abandons filters whether wait, at the end of the grace, abandons the
//     worker (the handler was running); broken by runFaultAbandonSettling.
//   - handedBack filters whether the worker took the record back from its
//     handler step (state moved from runHandling to runIdle); broken by
//     runFaultApplyAbandoned.
//   - applies filters whether the handler's result is applied (the
//     consumer was not closed meanwhile); broken by runFaultApplyClosed
//     and runFaultApplyAbandoned.
//
// The broken variants exist only in builds with the tributary_faults build
// tag (run_faults_on.go). In every other build runHooks is an empty struct
// whose methods are the identity (run_faults_off.go), which the compiler
// inlines, so the normal build pays nothing.
//
// docs/testing.md ("Deliberate faults") describes the mechanism that every
// package's faults share.

// runFault is one deliberate bug of Run's hand-off, named in the fault
// table (run_faults_on.go).
type runFault uint8

const (
	runFaultNone runFault = iota // the correct Run
	// runFaultApplyAbandoned: the worker applies a handler's result even
	// after Run abandoned the handler (returned at the end of the grace).
	runFaultApplyAbandoned
	// runFaultAbandonSettling: at the end of the grace Run returns
	// without waiting for a worker that is settling a record (its Ack or
	// dead letter), as if the handler were still running.
	runFaultAbandonSettling
	// runFaultApplyClosed: the worker applies the result of a handler
	// that closed its consumer (Close ends Run without applying it).
	runFaultApplyClosed
	runFaultCount
)
