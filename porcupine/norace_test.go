//go:build !race

package porcupine_test

// engineHistories is how many histories TestEngineLinearizable checks (see
// race_test.go for the race build's count).
const engineHistories = 240
