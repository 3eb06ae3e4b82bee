//go:build !tributary_faults

package engine

import "github.com/f91dcac0/tributary/shard"

// faultSet is empty in a normal build: no fault can be injected.
type faultSet struct{}

// on is the constant false in a normal build, so every fault branch in
// engine.go is dead code that the compiler removes.
func (faultSet) on(fault) bool { return false }

// checked is the constant false in a normal build.
func (faultSet) checked() bool { return false }

// The fault hooks below are referenced only inside branches guarded by on,
// which a normal build never takes.

func (t *topic) releasePolled(*assignment, shard.Mask) shard.Mask { panic(noFaults) }
func (t *topic) lockedAt(int32, int64) *entry                     { panic(noFaults) }

func (t *topic) faultYield() { panic(noFaults) }

func (t *topic) burnOffset(*partition, int64, bool) (int64, bool) { panic(noFaults) }

func (t *topic) lowIgnoringMemberless(*partition, *group, int64) int64 { panic(noFaults) }

const noFaults = "engine: fault hook reached in a build without tributary_faults"
