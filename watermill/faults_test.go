package tributarywm_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/f91dcac0/tributary/internal/faults"
)

// TestSuiteCatchesFaults shows that Watermill's suite, run as this
// package runs it, can fail: it builds this package's tests with the
// tributary_faults tag and runs one suite test per fault of the adapter's
// fault table (faults.go; for the dead-letter policy, which the suite does
// not exercise, this package's own test), switched on by name in
// TRIBUTARY_FAULT, which must fail, and the same tests with no fault
// switched on, which must pass. It runs only without -short (make
// test-watermill): nack-acks fails by timing out one 15 s read.
func TestSuiteCatchesFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a second test binary; make test-watermill runs it")
	}
	bin := filepath.Join(t.TempDir(), "faults.test")
	build := exec.Command("go", "test", "-c", "-tags", "tributary_faults", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c -tags tributary_faults: %v\n%s", err, out)
	}
	for _, c := range []struct {
		fault string
		run   string // a -test.run pattern: the suite test that must catch it
		wfail string // the failing test's name in the output
	}{
		{"drop-metadata", "^TestPubSubGroups$/^TestPublishSubscribe$", "--- FAIL: TestPubSubGroups/TestPublishSubscribe"},
		{"ack-on-send", "^TestPubSubOrdered$/^TestNoAck$", "--- FAIL: TestPubSubOrdered/TestNoAck"},
		{"nack-acks", "^TestPubSubGroups$/^TestResendOnError$", "--- FAIL: TestPubSubGroups/TestResendOnError"},
		// Watermill's suite has no poison queue: the adapter's own test.
		{"nack-ignores-dead-letter", "^TestSubscriptionFollowsItsGroupsPolicy$", "--- FAIL: TestSubscriptionFollowsItsGroupsPolicy"},
	} {
		t.Run(c.fault, func(t *testing.T) {
			t.Parallel()
			if out, err := runFaulty(t, bin, "", c.run); err != nil {
				t.Fatalf("without a fault, %s fails: %v\n%s", c.run, err, tail(out))
			}
			out, err := runFaulty(t, bin, c.fault, c.run)
			if err == nil {
				t.Fatalf("with fault %s, %s passes: the suite does not catch it\n%s", c.fault, c.run, tail(out))
			}
			if !strings.Contains(out, c.wfail) {
				t.Fatalf("with fault %s, the run failed but not in %q:\n%s", c.fault, c.wfail, tail(out))
			}
		})
	}
}

// runFaulty runs the fault-tagged test binary on pattern with fault
// switched on by name in faults.Env ("" for none), in -short mode, and returns its output.
func runFaulty(t *testing.T, bin, fault, pattern string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", pattern, "-test.short", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), faults.Env+"="+fault)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// tail returns the last 40 lines of s.
func tail(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
