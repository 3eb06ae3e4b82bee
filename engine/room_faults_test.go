//go:build tributary_faults

package engine_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/engine"
)

// TestRoomFaultsCaught: the room property of
// TestBlockedPublishWakesWhileGroupsAck fails on every wake-up fault
// (engine.SignalFaults), with a no-hang bound of one second so that the
// stall it finds costs little:
//
//	go test -count=1 -tags tributary_faults -run 'RoomFaults' ./engine/
func TestRoomFaultsCaught(t *testing.T) {
	for _, f := range engine.SignalFaults() {
		t.Run(f.String(), func(t *testing.T) {
			mk := func(c int32, opts ...engine.Option) (*engine.Broker, error) {
				b, err := engine.New(c, opts...)
				if err == nil {
					err = b.InjectFault(f)
				}
				return b, err
			}
			for _, c := range roomCases(rand.New(rand.NewPCG(20, 1)), 0) {
				if msg := roomRun(mk, c, time.Second); msg != "" {
					t.Logf("caught by %v: %s", c, msg)
					return
				}
			}
			t.Fatalf("fault %v not caught by the fixed room cases", f)
		})
	}
}
