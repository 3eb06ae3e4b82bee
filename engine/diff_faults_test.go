//go:build tributary_faults

package engine_test

// The differential test can fail for every deterministic bug it is meant to
// catch: with the engine built with the tributary_faults tag
// (engine/faults_on.go), each fault that a sequential caller can observe is
// switched on and the standard run of TestEngineMatchesModel must find a
// mismatch within its standard number of sequences.
//
//	go test -count=1 -tags tributary_faults -run 'Diff' ./engine/

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/f91dcac0/tributary/engine"
)

// sequentialFaults are the faults one goroutine can expose: the differential
// test must catch each. raceFaults need calls to interleave (they widen a
// window between two lock acquisitions), which a sequential test never
// does; the linearizability checker (package porcupine) covers them.
var (
	sequentialFaults = []engine.Fault{
		engine.FaultRebalanceKeepsInFlight,
		engine.FaultAckSkipsOwner,
		engine.FaultPublishBurnsOffset,
		engine.FaultTrimIgnoresMemberless,
		engine.FaultSeekKeepsInFlight,
		engine.FaultSetAssignorKeepsInFlight,
		engine.FaultWindowEvictsNeeded,
		engine.FaultDeleteSkipsRetention,
		engine.FaultAddedPartitionsWrongOffset,
		engine.FaultRebalanceResetsAttempts,
		engine.FaultAckIgnoresPin,
		engine.FaultLatestStartsBehind,
		engine.FaultRoomOnlyOnTrim, // a wake-up fault: sameRoom sees it
		engine.FaultExpirySkipsRebalance,
		engine.FaultExpiryStrict,
		engine.FaultRejoinKeepsDelivery,
		engine.FaultHeartbeatRejoins,
		engine.FaultSettleSkipsRefresh,
		engine.FaultJoinKeepsDeadline,
		engine.FaultCatchUpSkipsTrim,
	}
	raceFaults = []engine.Fault{
		engine.FaultPollReleasesEach,
		engine.FaultPollStaleAssignment,
		engine.FaultRebalanceSkipsLock,
		engine.FaultPollSkipsRecheck,
	}
)

// faultyEngine builds engines with fault f injected.
func faultyEngine(f engine.Fault) newSubject {
	return func(capacity int32, opts ...engine.Option) (subject, error) {
		b, err := engine.New(capacity, opts...)
		if err != nil {
			return nil, err
		}
		if err := b.InjectFault(f); err != nil {
			return nil, err
		}
		return b, nil
	}
}

// TestDiffFaultListIsComplete: every fault of the engine is classified
// here, so a new one cannot be left out of TestDiffFindsEveryFault.
func TestDiffFaultListIsComplete(t *testing.T) {
	known := map[engine.Fault]bool{}
	for _, f := range append(append([]engine.Fault{}, sequentialFaults...), raceFaults...) {
		known[f] = true
	}
	for _, f := range append(engine.Faults(), engine.SignalFaults()...) {
		if !known[f] {
			t.Errorf("fault %v is neither in sequentialFaults nor in raceFaults", f)
		}
	}
}

// TestDiffFindsEveryFault runs the standard run against each sequential
// fault and requires a mismatch within standardSequences sequences. A
// sequence counts only if the correct engine passes it, so that a real
// engine bug cannot stand in for the fault. It logs, per fault, the number
// of sequences it took and the shrunk failing sequence.
func TestDiffFindsEveryFault(t *testing.T) {
	n := standardSequences()
	var table strings.Builder
	fmt.Fprintf(&table, "%-32s %s\n", "fault", "caught by sequence")
	for _, f := range sequentialFaults {
		t.Run(f.String(), func(t *testing.T) {
			seq, report, shrunk := caughtBy(t, faultyEngine(f), standardRNG(), n)
			if seq == 0 {
				fmt.Fprintf(&table, "%-32s not caught in %d\n", f, n)
				t.Errorf("fault %v not caught in %d sequences", f, n)
				return
			}
			t.Logf("caught by sequence %d of %d, shrunk to %d ops:\n%s", seq, n, shrunk, report)
			fmt.Fprintf(&table, "%-32s %4d   (shrunk to %d ops)\n", f, seq, shrunk)
		})
	}
	for _, f := range raceFaults {
		fmt.Fprintf(&table, "%-32s (needs interleaving: not sequential)\n", f)
	}
	t.Logf("standard run of %d sequences:\n%s", n, table.String())
}

// TestDiffMemberEdgesFindLivenessFaults: the targeted sequences on the
// edges of a member's call (memberEdgeSequences) find each fault of member
// liveness and of the member's settle, so that they keep their power when
// the random run's coverage moves.
func TestDiffMemberEdgesFindLivenessFaults(t *testing.T) {
	scripts, configs := memberEdgeSequences()
	for _, f := range []engine.Fault{
		engine.FaultExpirySkipsRebalance, engine.FaultExpiryStrict, engine.FaultRejoinKeepsDelivery,
		engine.FaultHeartbeatRejoins, engine.FaultSettleSkipsRefresh, engine.FaultJoinKeepsDeadline,
		engine.FaultAckSkipsOwner,
	} {
		t.Run(f.String(), func(t *testing.T) {
			for _, ops := range scripts {
				for _, cfg := range configs {
					if at, _ := divergence(t, faultyEngine(f), cfg, slices.Clone(ops)); at >= 0 {
						return
					}
				}
			}
			t.Errorf("no member-edge sequence finds fault %v", f)
		})
	}
}

// TestParseFault: every fault's name parses back to it; anything else (an
// empty name, two names at once, another case, surrounding space, a
// number) is ErrInvalidArgument naming the input, and InjectFault refuses
// a Fault past the table.
func TestParseFault(t *testing.T) {
	all := append(append([]engine.Fault{engine.FaultNone}, engine.Faults()...), engine.SignalFaults()...)
	for _, f := range all {
		if got, err := engine.ParseFault(f.String()); err != nil || got != f {
			t.Errorf("ParseFault(%q) = %v, %v; want %v", f.String(), got, err, f)
		}
	}
	two := engine.FaultAckSkipsOwner.String() + "," + engine.FaultExpiryStrict.String()
	for _, name := range []string{"", two, strings.ToUpper(engine.FaultAckSkipsOwner.String()), " none", "none ", "0", "fault(1)"} {
		if f, err := engine.ParseFault(name); !errors.Is(err, engine.ErrInvalidArgument) || f != 0 {
			t.Errorf("ParseFault(%q) = %v, %v; want 0, ErrInvalidArgument", name, f, err)
		} else if !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("ParseFault(%q): error %q does not quote the name", name, err)
		}
	}
	b, err := engine.New(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.InjectFault(engine.Fault(255)); !errors.Is(err, engine.ErrInvalidArgument) {
		t.Errorf("InjectFault(255) = %v, want ErrInvalidArgument", err)
	}
}
