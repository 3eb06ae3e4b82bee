//go:build race

package tributary

// raceEnabled reports whether the tests run under the race detector, whose
// shadow memory and allocations distort heap and allocation figures.
const raceEnabled = true
