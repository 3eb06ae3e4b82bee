//go:build tributary_faults

package engine_test

import (
	"testing"

	"github.com/f91dcac0/tributary/engine"
)

// livenessFaults are the engine's faults of rules 24 and 25; the cases of
// session_test.go must catch each, by name and through handles.
var livenessFaults = []engine.Fault{
	engine.FaultExpirySkipsRebalance,
	engine.FaultExpiryStrict,
	engine.FaultRejoinKeepsDelivery,
	engine.FaultHeartbeatRejoins,
	engine.FaultSettleSkipsRefresh,
	engine.FaultJoinKeepsDeadline,
}

// TestLivenessFaultsCaught: with each liveness fault injected, some case of
// TestLiveness fails, both by name and through handles; the correct engine
// passes them all (TestLiveness), so the failure is the fault's.
//
//	go test -count=1 -tags tributary_faults -run 'LivenessFaults' ./engine/
func TestLivenessFaultsCaught(t *testing.T) {
	for _, f := range livenessFaults {
		t.Run(f.String(), func(t *testing.T) {
			mk := func(c int32, opts ...engine.Option) (*engine.Broker, error) {
				b, err := engine.New(c, opts...)
				if err == nil {
					err = b.InjectFault(f)
				}
				return b, err
			}
			for _, handles := range []bool{false, true} {
				caught := 0
				for _, k := range lvCases {
					if msg := runLv(mk, k, handles); msg != "" {
						if caught == 0 {
							t.Logf("handles=%v: caught by %q: %s", handles, k.name, msg)
						}
						caught++
					}
				}
				if caught == 0 {
					t.Errorf("fault %v not caught by any liveness case (handles=%v)", f, handles)
				}
			}
		})
	}
}
