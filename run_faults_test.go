//go:build tributary_faults

package tributary

import "testing"

// TestRunFaultsCaught: with each runFault switched on, the state cases
// that name it fail; TestRunState passes them on the correct Run, so the
// failure is the fault's.
//
//	go test -count=1 -tags tributary_faults -run 'RunFaults' .
func TestRunFaultsCaught(t *testing.T) {
	for _, k := range stateCases {
		t.Run(k.name, func(t *testing.T) {
			setRunFault(k.fault, true)
			defer setRunFault(k.fault, false)
			msg := k.run()
			if msg == "" {
				t.Fatalf("fault %s not caught", k.fault)
			}
			t.Logf("caught: %s", msg)
		})
	}
}
