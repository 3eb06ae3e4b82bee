package jetstream

// Requests returns how many messages b's connection has sent so far: each
// JetStream API call, state read or write, fetch, publish and notice is one
// (nats.Conn.Stats' OutMsgs).
func Requests(b *Backend) uint64 { return b.nc.Stats().OutMsgs }

// SetSnapshots turns b's snapshot reads (batch.go) on or off, as a server
// that refuses them would: off, every key is read by its own request.
func SetSnapshots(b *Backend, on bool) { b.snapshots.Store(on) }

// CountReadAt returns when b last read topic t's partition count (Unix ns;
// 0: never read): Topic.Partitions reads it again, one request, once that
// read is over a second old, so a call across which it changes made that
// request.
func CountReadAt(b *Backend, t string) int64 {
	b.mu.Lock()
	c := b.counts[t]
	b.mu.Unlock()
	if c == nil {
		return 0
	}
	return c.checked.Load()
}

// Fail is b.fail: how b classifies a NATS error.
func Fail(b *Backend, err error) error { return b.fail(err) }
