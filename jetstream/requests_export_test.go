package jetstream

// Requests returns how many messages b's connection has sent so far: each
// JetStream API call, state read or write, fetch, publish and notice is one
// (nats.Conn.Stats' OutMsgs).
func Requests(b *Backend) uint64 { return b.nc.Stats().OutMsgs }

// SetSnapshots turns b's snapshot reads (batch.go) on or off, as a server
// that refuses them would: off, every key is read by its own request.
func SetSnapshots(b *Backend, on bool) { b.snapshots.Store(on) }
