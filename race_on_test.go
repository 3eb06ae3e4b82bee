//go:build race

package tributary_test

// raceEnabled reports whether the tests run under the race detector, which
// allocates on its own and so makes allocation counts meaningless.
const raceEnabled = true
