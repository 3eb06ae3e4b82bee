package jetstream_test

import (
	"errors"
	"testing"

	tributary "github.com/f91dcac0/tributary"
	"github.com/f91dcac0/tributary/jetstream"
)

// An Ack or Retry settled by its poll's write (one compare-and-set of the
// cursor from the revision the poll wrote) whose reply is lost returns
// ErrUnavailable, and the same call again (the typed Consumer's Run
// retries a settle through an outage) finds it done: false, the record
// settled once, not in flight, the next poll delivering what follows (an
// Ack) or the same record again (a Retry, attempt 2). A request lost
// before it reached the server changed nothing: the same call again
// settles it.
func TestSettleAfterLostReply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retry   bool
		written bool // the write reached the server, its reply lost
		wagain  bool // what the same call again returns
		wpoll   rec  // the next poll
	}{
		{"ack-reply-lost", false, true, false, rec{0, 1, "y", 1}},
		{"ack-request-lost", false, false, true, rec{0, 1, "y", 1}},
		{"retry-reply-lost", true, true, false, rec{0, 0, "x", 2}},
		{"retry-request-lost", true, false, true, rec{0, 0, "x", 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := start(t, jetstream.Config{Capacity: 10})
			bt := topic(t, b, "t", 1)
			pub(t, bt, 0, "x")
			pub(t, bt, 0, "y")
			m := member(t, bt, "g", "a")
			must(m.Join()).of(t)
			wantRecs(t, poll(t, m, 1), rec{0, 0, "x", 1})
			settle := func() (bool, error) {
				if tc.retry {
					return m.Retry(0, 0)
				}
				return m.Ack(0, 0)
			}
			lost := false
			jetstream.SetLossy(b, func(key string, written bool) bool {
				if key == "cursor.t.g.0" && written == tc.written && !lost {
					lost = true
					return true
				}
				return false
			})
			ok, err := settle()
			jetstream.SetLossy(b, nil)
			if !lost || ok || !errors.Is(err, tributary.ErrUnavailable) {
				t.Fatalf("the settle with its write lost (hook fired %v) = %v, %v; want ErrUnavailable", lost, ok, err)
			}
			ok, err = settle()
			wantBool(t, "the same settle again", ok, err, tc.wagain)
			d := must(b.Describe("t")).of(t).Groups[0].Partitions[0]
			if wc := tc.wpoll.Off; d.Committed != wc || d.InFlight {
				t.Fatalf("after the settles: committed %d, in flight %v; want %d, nothing in flight", d.Committed, d.InFlight, wc)
			}
			wantRecs(t, poll(t, m, 1), tc.wpoll)
		})
	}
}
