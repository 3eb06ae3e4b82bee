//go:build !race

package engine_test

// raceEnabled reports whether the tests run under the race detector, where
// sequential tests shrink their iteration counts.
const raceEnabled = false
