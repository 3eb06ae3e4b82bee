//go:build race

package porcupine_test

// engineHistories is how many histories TestEngineLinearizable checks. The
// race detector slows the engine and the checker by an order of magnitude,
// and `make test` runs every package under it, so a race build checks
// fewer; the full count runs in the tributary_faults step of `make test`
// and in any plain `go test ./porcupine/...`.
const engineHistories = 96
