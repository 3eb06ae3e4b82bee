package ringlog

//lint:file-ignore U1000 the faults are named here for the tributary_faults build (faults_on.go).

// Deliberate bugs of the paged log, for proving that its tests catch them
// (ringlog/faults_test.go). Each is the broken variant of one seam, a
// method of the log's hooks that ringlog.go calls where the step is:
//
//   - filling runs before install copies the pages in use into a grown
//     directory; its broken variant (grow-publishes-early) publishes the
//     directory first.
//   - firstKept filters the first page TrimTo keeps; its broken variant
//     (trim-frees-live-page) gives up the page of the new log start too.
//
// The broken variants exist only in builds with the tributary_faults
// build tag (faults_on.go, which exports InjectFault and Faults). In every
// other build hooks is an empty struct whose methods are the correct steps
// (faults_off.go): nothing, and the identity, which the compiler inlines,
// so the normal build pays nothing.
//
// docs/testing.md ("Deliberate faults") describes the mechanism that every
// package's faults share.

// fault identifies one deliberate bug; faultNone is the correct log.
type fault uint8

const (
	faultNone fault = iota
	// A grown directory is published before the pages in use are copied
	// into it, so a concurrent Read can find its page missing.
	faultGrowPublishesEarly
	// TrimTo gives up the page holding the new log start too, although
	// entries of it are still retained.
	faultTrimFreesLivePage
	faultCount
)
