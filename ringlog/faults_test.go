//go:build tributary_faults

package ringlog_test

import (
	"testing"

	"github.com/f91dcac0/tributary/internal/faults"
	"github.com/f91dcac0/tributary/ringlog"
)

// TestFaultsCaught: the log's checks fail on each deliberate bug of the
// paged log (ringlog/faults_on.go):
//
//	go test -count=1 -tags tributary_faults ./ringlog/
//
// A directory published before it is filled is seen only by a concurrent
// reader, so readWhileAppending runs on a log whose directory grows from
// 2 to 128 slots, up to 20 times; a live page given up is seen by the
// sequential matchesSlice at once.
func TestFaultsCaught(t *testing.T) {
	if len(ringlog.Faults()) == 0 {
		t.Fatal("ringlog.Faults() is empty: no fault to catch")
	}
	for _, f := range ringlog.Faults() {
		t.Run(f, func(t *testing.T) {
			if err := ringlog.InjectFault(f); err != nil {
				t.Fatal(err)
			}
			defer ringlog.InjectFault(faults.None) //nolint:errcheck // "none" is in every table
			for try := 1; try <= 20; try++ {
				msg := matchesSlice(3000, 2000)
				if msg == "" {
					msg = readWhileAppending(100*ringlog.PageLen, 120*ringlog.PageLen)
				}
				if msg != "" {
					t.Logf("caught on try %d: %s", try, msg)
					return
				}
			}
			t.Fatalf("fault %s not caught in 20 tries", f)
		})
	}
}
