package tributary

// runFault is one deliberate bug of Consumer.Run's handler hand-off, for
// proving that the tests of run_state_test.go catch it. A fault can be
// switched on only in a build with the tributary_faults tag
// (run_faults_on.go); otherwise runFaultOn is the constant false and the
// compiler removes every fault branch.
type runFault uint8

const (
	// runFaultApplyAbandoned: the worker applies a handler's result even
	// after Run abandoned the handler (returned at the end of the grace).
	runFaultApplyAbandoned runFault = iota
	// runFaultAbandonSettling: at the end of the grace Run returns
	// without waiting for a worker that is settling a record (its Ack or
	// dead letter), as if the handler were still running.
	runFaultAbandonSettling
	// runFaultApplyClosed: the worker applies the result of a handler
	// that closed its consumer (Close ends Run without applying it).
	runFaultApplyClosed
)
