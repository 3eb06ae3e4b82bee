//go:build !race

package tributary_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
