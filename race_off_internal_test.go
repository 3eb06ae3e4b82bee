//go:build !race

package tributary

// raceEnabled: see race_on_internal_test.go.
const raceEnabled = false
