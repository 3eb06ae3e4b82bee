package jetstream_test

import (
	"fmt"
	"testing"
	"time"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/backendtest"
	"github.com/f91dcac0/tributary/jetstream"
)

// TestPublishWakesOnCommit runs the suite's BlockingPublishWhileGroupsAck
// check with the fallback of a blocked Publish lengthened to an hour, so
// that only its wake-ups can end a wait: a commit that makes the oldest
// record of a full partition fully committed, purging nothing when the
// replay window covers it (a window equal to the capacity), must wake the
// producer as a purge does.
func TestPublishWakesOnCommit(t *testing.T) {
	srv, err := jetstream.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	var check backendtest.Check
	for _, c := range backendtest.Checks() {
		if c.Name == "BlockingPublishWhileGroupsAck" {
			check = c
		}
	}
	if check.Run == nil {
		t.Fatal("no check BlockingPublishWhileGroupsAck in backendtest.Checks")
	}
	n := 0
	check.Run(t, func(cfg backendtest.Config) tributary.Backend {
		n++
		b, err := jetstream.Open(jetstream.Config{
			Server: srv, Prefix: fmt.Sprintf("W%d", n), Storage: jetstream.MemoryStorage,
			Capacity: cfg.Capacity, ReplayWindow: cfg.ReplayWindow,
		})
		if err != nil {
			t.Fatal(err)
		}
		jetstream.SetRoomWait(b, time.Hour)
		t.Cleanup(func() { b.Close() })
		return b
	})
}
