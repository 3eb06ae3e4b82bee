package ringlog

// Deliberate bugs of the paged log, for proving that its tests catch them
// (ringlog/faults_test.go). Each is guarded in ringlog.go by a branch
// `if faultOn(faultX)`; they exist only in builds with the tributary_faults
// build tag (faults_on.go, which exports InjectFault). In every other build
// faultOn is the constant false (faults_off.go) and the compiler removes
// the branches.

// fault identifies one deliberate bug; faultNone is the correct log.
type fault uint8

const (
	//lint:ignore U1000 named for faults_on.go (tributary_faults builds)
	faultNone fault = iota
	// A grown directory is published before the pages in use are copied
	// into it, so a concurrent Read can find its page missing.
	faultGrowPublishesEarly
	// TrimTo gives up the page holding the new log start too, although
	// entries of it are still retained.
	faultTrimFreesLivePage
	//lint:ignore U1000 named for faults_on.go (tributary_faults builds)
	faultCount
)
