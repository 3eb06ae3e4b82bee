package jetstream_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/backendtest"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestConformance runs the backend-agnostic suite on one embedded server,
// each backend under its own prefix (a fresh, empty broker).
func TestConformance(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	var n atomic.Int64
	backendtest.Run(t, func(t *testing.T, cfg backendtest.Config) tributary.Backend {
		b, err := jetstream.Open(jetstream.Config{
			Server: srv, Prefix: fmt.Sprintf("C%d", n.Add(1)), Storage: jetstream.MemoryStorage,
			Capacity: cfg.Capacity, AckTimeout: cfg.AckTimeout, Clock: cfg.Clock, MaxMessageBytes: cfg.MaxMessageBytes,
			ReplayWindow: cfg.ReplayWindow,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}, livenessSkips)
}

// livenessSkips are the checks of rule 24 and those of rule 25 that need a
// session timeout, which this backend does not enforce yet: that is the
// JetStream issue's (liveness.go: SessionTimeout is 0). Rule 25's fencing
// of earlier incarnations runs.
var livenessSkips = func() map[string]string {
	const why = "the session timeout (SPEC rule 24) is not built on JetStream yet: the JetStream issue's (Backend.SessionTimeout is 0); these checks need it"
	skips := map[string]string{}
	for _, name := range []string{
		"Rule24WorkedExample", "Rule24SessionTimeout", "Rule24ExpiredMember",
		"Rule25WorkedExample", "Rule25Rejoin",
	} {
		skips[name] = why
	}
	return skips
}()
